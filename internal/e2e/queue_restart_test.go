package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Fault schedule: the queue Redis (also the lock master) is killed and
// restarted while two `baton run` replicas dispatch and run a job every
// second, with and without persistence. The replicas are configured as in
// production (no fresh-deployment opt-in; a restarted master grants
// nothing for restart_quarantine, 10 s here). The history checker judges
// every tick of the window: ran once, or recorded as not run with why;
// what the restart lost is counted and printed (docs/operating.md, "What a
// queue Redis restart loses", states it).
func TestQueueRedisRestart(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, tc := range []struct {
		name string
		args []string
		keep bool
	}{
		{"append-only file, fsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
		{"no persistence", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // real time, mostly waited: the cases overlap
			srv := redistest.New(t, redistest.WithArgs(tc.args...))
			// a first deployment marks its master, as `baton lock
			// --fresh-deployment` does; the replicas then run strict
			mark := exec.Command(binary, "lock", "--fresh-deployment", "--redis", "redis://"+srv.Addr()+"/0", "mark", "--", "true")
			if out, err := mark.CombinedOutput(); err != nil {
				t.Fatalf("marking the deployment: %v\n%s", err, out)
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "every.out")
			cfg := filepath.Join(dir, "baton.yaml")
			y := fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  restart_quarantine: 10s
namespace: qr
history:
  runs: 1000
jobs:
  - name: every-second
    schedule: "@every 1s"
    starting_deadline: 30s
    catchup: all
    catchup_max: 100
    lock_ttl: 3s
    exec:
      command: ["sh", "-c", "echo \"$BATON_TICK $BATON_FENCING_TOKEN start $(date +%%s%%N)\" >> %s"]
`, srv.Addr(), out)
			if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			var reps []*proc
			for i := range 2 {
				p := &proc{name: fmt.Sprintf("run-%d", i), args: []string{"run", "--config", cfg, "--id", fmt.Sprintf("r%d", i), "--log-format", "json"}}
				p.start(t, dir)
				reps = append(reps, p)
			}
			from := awaitStarted(t, dir, reps)
			time.Sleep(6 * time.Second) // real time: ticks run
			restarted := time.Now()
			var err error
			if tc.keep {
				err = srv.RestartFromSnapshot() // kill -9, reload the append-only file
			} else {
				err = srv.Restart() // kill -9, start empty
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(22 * time.Second) // real time: the quarantine, then ticks again
			until := time.Now().Add(-2 * time.Second).Truncate(time.Second)
			// without persistence what was queued or recorded when Redis
			// died is gone: the ticks due once the master is back out of
			// its quarantine are judged
			after := restarted.Add(14 * time.Second).Truncate(time.Second)
			judged := from
			if !tc.keep {
				judged = after
			}
			rdb := srv.TestClient(t)
			insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
			defer insp.Close()
			// the window's last ticks run (in other processes, on a busy
			// machine: awaited, not slept for), within the quarantine and
			// baton's retries (10 + 20 + 40 s)
			awaitOutcomes(t, rdb, insp, "qr", out, judged, until, 2*time.Minute)
			for _, p := range reps {
				p.signal(syscall.SIGTERM)
			}
			for _, p := range reps {
				p.wait(t, 20*time.Second)
			}

			h := histcheck.New()
			for tick := from; !tick.After(until); tick = tick.Add(time.Second) {
				h.Ticked(histcheck.Tick{Job: "every-second", Tick: tick, Event: "expected"})
			}
			for _, l := range readRunLines(t, out) {
				if !l.tick.Before(from) && !l.tick.After(until) {
					h.Ticked(histcheck.Tick{Job: "every-second", Tick: l.tick, Event: "dispatched", Replica: fmt.Sprintf("fence %d", l.fence)})
				}
			}
			for _, r := range outcomes(t, rdb, insp, "qr", out, from, until).notRun {
				h.Ticked(histcheck.Tick{Job: "every-second", Tick: r.Tick, Event: "missed", Reason: string(r.Status) + ": " + r.Reason})
				t.Logf("%s %s: %s", r.Tick.Format(time.TimeOnly), r.Status, r.Reason)
			}
			c := h.Counts()
			fmt.Printf("queue Redis restart (%s): window %d ticks, ran %d, ran twice %d, recorded not run %d, lost %d (restart at +%v)\n",
				tc.name, c.Expected, c.Dispatched, c.Duplicated, c.Missed, c.Lost, restarted.Sub(from).Round(time.Second))
			if c.Duplicated > 0 {
				t.Errorf("%d ticks ran twice", c.Duplicated)
			}
			if tc.keep {
				if err := h.Check(); err != nil {
					logTicksOf(t, reps, err)
					t.Fatal(err)
				}
				return
			}
			// without persistence: the ticks due once the master is back
			// out of its quarantine run exactly once, or are skipped (and
			// recorded) while the run before still holds the job: a run
			// that outlasts a second on a busy machine
			tail := histcheck.New()
			for tick := after; !tick.After(until); tick = tick.Add(time.Second) {
				tail.Ticked(histcheck.Tick{Job: "every-second", Tick: tick, Event: "expected"})
			}
			o := outcomes(t, rdb, insp, "qr", out, after, until)
			for _, l := range o.ran {
				tail.Ticked(histcheck.Tick{Job: "every-second", Tick: l.tick, Event: "dispatched"})
			}
			for _, r := range o.notRun {
				if r.Status == jobs.StatusSkipped {
					tail.Ticked(histcheck.Tick{Job: "every-second", Tick: r.Tick, Event: "missed", Reason: string(r.Status) + ": " + r.Reason})
				}
			}
			if err := tail.Check(); err != nil {
				t.Fatalf("after the restart and its quarantine: %v", err)
			}
		})
	}
}

// tickInError finds the ticks a histcheck error names (job@RFC3339).
var tickInError = regexp.MustCompile(`@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)`)

// logTicksOf logs what each replica's log says of the ticks err names, so
// that a failure seen once (under load) can be read afterwards.
func logTicksOf(t *testing.T, reps []*proc, err error) {
	t.Helper()
	for _, m := range tickInError.FindAllStringSubmatch(err.Error(), 5) {
		for _, p := range reps {
			b, rerr := os.ReadFile(p.log.Name())
			if rerr != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, m[1]) {
					t.Logf("%s: %s", p.name, line)
				}
			}
		}
	}
}
