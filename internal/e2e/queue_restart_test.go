package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
			from := time.Now().Add(2 * time.Second).Truncate(time.Second)
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
			time.Sleep(22 * time.Second) // the quarantine, then ticks again
			until := time.Now().Add(-2 * time.Second).Truncate(time.Second)
			time.Sleep(3 * time.Second)
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
			recs, err := jobs.ReadHistory(context.Background(), srv.Client(), "qr", "every-second", 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if !r.Tick.Before(from) && !r.Tick.After(until) && r.Started.IsZero() &&
					(r.Status == jobs.StatusMissed || r.Status == jobs.StatusSkipped) {
					h.Ticked(histcheck.Tick{Job: "every-second", Tick: r.Tick, Event: "missed", Reason: string(r.Status) + ": " + r.Reason})
					t.Logf("%s %s: %s", r.Tick.Format(time.TimeOnly), r.Status, r.Reason)
				}
			}
			c := h.Counts()
			fmt.Printf("queue Redis restart (%s): window %d ticks, ran %d, ran twice %d, recorded not run %d, lost %d (restart at +%v)\n",
				tc.name, c.Expected, c.Dispatched, c.Duplicated, c.Missed, c.Lost, restarted.Sub(from).Round(time.Second))
			if c.Duplicated > 0 {
				t.Errorf("%d ticks ran twice", c.Duplicated)
			}
			if tc.keep {
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
				return
			}
			// without persistence: what was queued or recorded when Redis
			// died is gone; the ticks due once the master is back out of
			// its quarantine run exactly once
			after := restarted.Add(14 * time.Second).Truncate(time.Second)
			tail := histcheck.New()
			for tick := after; !tick.After(until); tick = tick.Add(time.Second) {
				tail.Ticked(histcheck.Tick{Job: "every-second", Tick: tick, Event: "expected"})
			}
			for _, l := range readRunLines(t, out) {
				if !l.tick.Before(after) && !l.tick.After(until) {
					tail.Ticked(histcheck.Tick{Job: "every-second", Tick: l.tick, Event: "dispatched"})
				}
			}
			if err := tail.Check(); err != nil {
				t.Fatalf("after the restart and its quarantine: %v", err)
			}
		})
	}
}
