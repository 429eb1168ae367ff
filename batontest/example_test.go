package batontest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

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
