package batontest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batontest"
	"github.com/batonhq/baton/jobs"
)

// A test of a handler and the job that runs it. In a test file it is
// func TestReport(t *testing.T) { ... }; here batontest.Run gives it a t.
func Example() {
	batontest.Run(os.Stdout, func(t testing.TB) {
		reg := jobs.NewRegistry()
		_ = reg.HandleFunc("report", func(_ context.Context, run jobs.Run) error {
			fmt.Println("report for", run.Tick.Format("15:04"))
			return nil
		})
		start := time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC)
		env := batontest.Load(t, `
jobs:
  - name: report
    schedule: "0 9-17/4 * * *"
    handler: {name: report}
`, batontest.WithHandlers(reg), batontest.WithStart(start))

		env.AdvanceTo(t, start.Add(12*time.Hour))
		env.RequireRan(t, "report", time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC))
		env.RequireNotDispatched(t, "report", time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
	})
	// Output:
	// report for 09:00
	// report for 13:00
	// report for 17:00
}

// A runtime schedule, one per customer, put while the Env runs: it runs
// from its put instant on the fake clock, with its payload.
func ExampleEnv_PutSchedule() {
	batontest.Run(os.Stdout, func(t testing.TB) {
		reg := jobs.NewRegistry()
		_ = reg.HandleFunc("report", func(_ context.Context, run jobs.Run) error {
			fmt.Println(run.Job, run.Tick.Format("Mon 15:04"), string(run.Payload))
			return nil
		})
		_ = reg.HandleFunc("cleanup", func(context.Context, jobs.Run) error { return nil })
		start := time.Date(2030, 1, 6, 12, 0, 0, 0, time.UTC) // a Sunday
		env := batontest.Load(t, `
jobs:
  - name: cleanup
    schedule: "0 3 * * *"
    handler: {name: cleanup}
`, batontest.WithHandlers(reg), batontest.WithStart(start))

		env.PutSchedule(t, "report/tenant-42", baton.ScheduleSpec{
			Schedule: "0 9 * * MON", Timezone: "Europe/Berlin",
			Handler: "report", Payload: []byte(`{"tenant":42}`),
		})
		env.AdvanceTo(t, start.Add(24*time.Hour))
		env.RequireRan(t, "@report/tenant-42", time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC))
	})
	// Output:
	// @report/tenant-42 Mon 08:00 {"tenant":42}
}

// A business calendar and a DST policy on the fake clock: the report runs
// on the days that are no holiday, once on the day the clocks go back.
func ExampleEnv_calendars() {
	batontest.Run(os.Stdout, func(t testing.TB) {
		reg := jobs.NewRegistry()
		_ = reg.HandleFunc("report", func(_ context.Context, run jobs.Run) error {
			fmt.Println("report for", run.Tick.In(berlin).Format("Mon 02 Jan 15:04 MST"))
			return nil
		})
		start := time.Date(2030, 10, 24, 12, 0, 0, 0, time.UTC) // a Thursday
		env := batontest.Load(t, `
timezone: Europe/Berlin
calendars:
  holidays: {dates: [2030-10-25]}
jobs:
  - name: report
    schedule: "30 2 * * *"
    dst: once
    exclude: [holidays]
    handler: {name: report}
`, batontest.WithHandlers(reg), batontest.WithStart(start))
		env.AdvanceTo(t, time.Date(2030, 10, 28, 12, 0, 0, 0, time.UTC))
		env.RequireNotDispatched(t, "report", time.Date(2030, 10, 25, 0, 30, 0, 0, time.UTC))
	})
	// Output:
	// report for Sat 26 Oct 02:30 CEST
	// report for Sun 27 Oct 02:30 CEST
	// report for Mon 28 Oct 02:30 CET
}

var berlin, _ = time.LoadLocation("Europe/Berlin")

// A chain on the fake clock: load runs after each tick of extract that
// succeeded, and is skipped for the one that failed.
func ExampleEnv_chain() {
	batontest.Run(os.Stdout, func(t testing.TB) {
		reg := jobs.NewRegistry()
		_ = reg.HandleFunc("extract", func(_ context.Context, run jobs.Run) error {
			fmt.Println("extract", run.Tick.Format("15:04"))
			if run.Tick.Hour() == 2 {
				return errors.New("the source is down")
			}
			return nil
		})
		_ = reg.HandleFunc("load", func(_ context.Context, run jobs.Run) error {
			fmt.Println("load", run.Tick.Format("15:04"))
			return nil
		})
		env := batontest.Load(t, `
jobs:
  - {name: extract, schedule: "0 * * * *", max_retry: 0, handler: {name: extract}}
  - {name: load, after: [extract], handler: {name: load}}
`, batontest.WithHandlers(reg), batontest.WithStart(time.Date(2030, 1, 1, 0, 30, 0, 0, time.UTC)))
		env.AdvanceTo(t, time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC))
		for _, r := range env.Runs(t, "load") {
			if r.Status == jobs.StatusSkipped {
				fmt.Println("load", r.Tick.Format("15:04"), "skipped:", strings.SplitN(r.Reason, ": ", 2)[0])
			}
		}
	})
	// Output:
	// extract 01:00
	// load 01:00
	// extract 02:00
	// extract 03:00
	// load 03:00
	// load 02:00 skipped: extract@2030-01-01T02:00:00Z failed
}
