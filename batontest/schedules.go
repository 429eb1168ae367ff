package batontest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
)

// runtimeJobs are the jobs of the runtime schedules put through an Env: the
// source of the Env's config (config.JobSource), so that AdvanceTo and the
// Require helpers know them by their names ("@" + id).
type runtimeJobs struct {
	mu     sync.Mutex
	byName map[string]*config.Job
}

func (r *runtimeJobs) ScheduleJob(name string) (*config.Job, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.byName[name]
	return j, ok
}

func (r *runtimeJobs) set(name string, j *config.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j == nil {
		delete(r.byName, name)
		return
	}
	r.byName[name] = j
}

// PutSchedule creates or replaces runtime schedule id (its job is named
// "@" + id: config.ScheduleJobName) as Cluster.PutSchedule does, and
// returns once the Env's replica follows it. The schedule starts from its
// put instant, by the fake clock: its first tick is the first at or after
// Now (not before Now less its starting deadline, as a replica that
// learns of a schedule late would), and AdvanceTo settles its ticks as it
// does the job list's. It fails the test when the definition is refused
// (the error names each field and why) or the replica does not follow it
// within the Env's timeout.
func (e *Env) PutSchedule(t testing.TB, id string, spec baton.ScheduleSpec) baton.Schedule {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.Cluster(t).PutSchedule(ctx, id, spec)
	if err != nil {
		t.Fatalf("batontest: PutSchedule(%q): %v", id, err)
	}
	j, err := config.DecodeSchedule(e.cfg, id, s.Definition, s.Created)
	if err != nil {
		t.Fatalf("batontest: PutSchedule(%q): %v", id, err)
	}
	j.Ref = config.ScheduleRef{Version: s.Version, Created: s.Created}
	e.runtime.set(j.Name, j)
	delete(e.next, j.Name)
	if first := e.firstTick(j, s.Updated); !first.IsZero() {
		e.next[j.Name] = first
	}
	e.follow(t, "PutSchedule", id, s.Change)
	return s
}

// DeleteSchedule deletes runtime schedule id (Cluster.DeleteSchedule) and
// returns once the Env's replica follows: no tick of it is claimed after.
// A run under way finishes, or is stopped with stopRunning.
func (e *Env) DeleteSchedule(t testing.TB, id string, stopRunning bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Cluster(t).DeleteSchedule(ctx, id, stopRunning); err != nil {
		t.Fatalf("batontest: DeleteSchedule(%q): %v", id, err)
	}
	name := config.ScheduleJobName(id)
	delete(e.next, name)
	// the replica's lookup finds it until its copy drops it (a schedule
	// it does not hold is read from Redis, where it is gone)
	gone := func() bool { _, ok := e.replica.Config().Job(name); return !ok }
	if !poll.Until(e.timeout, gone) {
		t.Fatalf("batontest: DeleteSchedule(%q): the replica did not follow the delete within %s", id, e.timeout)
	}
	e.runtime.set(name, nil)
}

// firstTick is a runtime schedule's first tick as the replica's scheduler
// starts it: at or after the put instant (by Redis TIME, which the
// embedded server takes from the fake clock), not before Now less the
// starting deadline, and not after Now; zero when it has none.
func (e *Env) firstTick(j *config.Job, put time.Time) time.Time {
	if j.Mode == config.ModeSingleton || j.Sched == nil {
		return time.Time{}
	}
	now := e.clk.Now()
	from := now.Add(-j.StartingDeadline)
	if put.After(from) {
		from = put
	}
	if from.After(now) {
		from = now
	}
	return j.Sched.Next(from.Add(-time.Nanosecond)).UTC()
}

// follow waits until the replica has applied the runtime schedules' change
// ver.
func (e *Env) follow(t testing.TB, what, id string, ver int64) {
	t.Helper()
	if !poll.Until(e.timeout, func() bool { return e.replica.ScheduleChange(id) >= ver }) {
		t.Fatalf("batontest: %s(%q): the replica did not follow the change (%d; it has %d) within %s",
			what, id, ver, e.replica.ScheduleChange(id), e.timeout)
	}
}
