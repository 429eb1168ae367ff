package batontest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/schedstore"
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
	e.follow(t, "PutSchedule", id, s.Change)
	// the job as the replica decoded it (with the calendars it names)
	j, ok := e.replicaJob(s.Job)
	if !ok {
		t.Fatalf("batontest: PutSchedule(%q): the replica does not run it (baton schedules get %s says why)", id, id)
	}
	e.runtime.set(j.Name, j)
	delete(e.next, j.Name)
	if first := e.firstTick(j, s.Updated); !first.IsZero() {
		e.next[j.Name] = first
	}
	return s
}

// replicaJob is runtime job name as the Env's replica holds it.
func (e *Env) replicaJob(name string) (*config.Job, bool) {
	j, ok := e.replica.Config().Job(name)
	if !ok || j.Ref.Version == 0 {
		return nil, false
	}
	return j, true
}

// PutCalendar creates or replaces runtime calendar name
// (Cluster.PutCalendar) and returns once the Env's replica follows it:
// from then on the runtime schedules that name it tick on its new days
// (their next tick is the first after Now that the calendar leaves). It
// fails the test when the calendar is refused.
func (e *Env) PutCalendar(t testing.TB, name string, spec baton.CalendarSpec) baton.Calendar {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cal, err := e.Cluster(t).PutCalendar(ctx, name, spec)
	if err != nil {
		t.Fatalf("batontest: PutCalendar(%q): %v", name, err)
	}
	e.follow(t, "PutCalendar", schedstore.CalendarID(name), cal.Change)
	e.runtime.mu.Lock()
	var naming []string
	for n, j := range e.runtime.byName {
		if slices.Contains(j.Exclude, name) || slices.Contains(j.Only, name) {
			naming = append(naming, n)
		}
	}
	e.runtime.mu.Unlock()
	for _, n := range naming {
		j, ok := e.replicaJob(n)
		if !ok {
			t.Fatalf("batontest: PutCalendar(%q): the replica no longer runs %s", name, n)
		}
		e.runtime.set(n, j)
		// the ticks up to now are settled: its next is the first after
		// now its new days leave
		if _, ok := e.next[n]; ok {
			if next := j.Sched.Next(e.clk.Now()); next.IsZero() {
				delete(e.next, n)
			} else {
				e.next[n] = next.UTC()
			}
		}
	}
	return cal
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
