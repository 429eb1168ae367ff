package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds the scheduler's set of jobs, which Put and Remove change
// while Run runs (baton's schedules made at runtime). Run's loop checks
// each claim it pops against the set (current): a claim of a removed job
// is dropped, one of a replaced job is made for its new definition. A
// tick's identity is its job's name and instant, so a claim made under the
// old definition by one replica and under the new one by another is still
// one claim of one tick.

// prepare checks j (the i-th job given) and fills in its defaults and
// counters (its own, or its StatsGroup's).
func (s *Scheduler) prepareJob(j Job, i int) (*Job, error) {
	var errs []error
	switch {
	case j.Name == "":
		return nil, fmt.Errorf("scheduler: job %d has no name", i)
	case j.Schedule == nil:
		errs = append(errs, fmt.Errorf("scheduler: job %q has no schedule", j.Name))
	case j.StartingDeadline <= 0:
		errs = append(errs, fmt.Errorf("scheduler: job %q: starting deadline must be > 0", j.Name))
	case j.Jitter < 0 || j.Jitter >= j.StartingDeadline:
		errs = append(errs, fmt.Errorf("scheduler: job %q: jitter %v must be >= 0 and below the starting deadline %v", j.Name, j.Jitter, j.StartingDeadline))
	}
	switch j.Catchup {
	case "":
		j.Catchup = CatchupLatest
	case CatchupSkip, CatchupLatest, CatchupAll:
	default:
		errs = append(errs, fmt.Errorf("scheduler: job %q: unknown catch-up policy %q", j.Name, j.Catchup))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if j.CatchupMax <= 0 {
		j.CatchupMax = 10
	}
	j.ctr = s.counters(j.StatsGroup)
	return &j, nil
}

// counters returns the counters of a job of StatsGroup group: its own when
// group is "", else the group's, made at its first job.
func (s *Scheduler) counters(group string) *stats {
	if group == "" {
		return &stats{}
	}
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if s.groups == nil {
		s.groups = map[string]*stats{}
	}
	c := s.groups[group]
	if c == nil {
		c = &stats{}
		s.groups[group] = c
	}
	return c
}

// Put adds jobs, or replaces the jobs of the same names: a scheduler that
// runs claims their ticks from the next loop on. A job put while Run runs
// starts from its first tick at or after its Since (floored at its
// starting deadline ago), so a job learned a moment after it was made
// loses no tick; a job put before Run starts as New's jobs do (with the
// catch-up). A tick of a replaced job due before the new job's Since and
// not yet claimed is still claimed, once: it was due under the old
// definition. It fails, changing nothing, if a job is invalid.
func (s *Scheduler) Put(jobs ...Job) error {
	var errs []error
	prepared := make([]*Job, 0, len(jobs))
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		if seen[jobs[i].Name] {
			errs = append(errs, fmt.Errorf("scheduler: job %q put twice", jobs[i].Name))
			continue
		}
		seen[jobs[i].Name] = true
		j, err := s.prepareJob(jobs[i], i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prepared = append(prepared, j)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.jobsMu.Lock()
	for _, j := range prepared {
		if _, ok := s.jobs[j.Name]; ok {
			s.stale.Add(1) // its entry in Run's queue is the old definition's
		}
		s.jobs[j.Name] = j
		s.exhausted.Delete(j.Name) // a new definition may allow more runs
	}
	if s.running.Load() {
		s.added = append(s.added, prepared...)
	}
	s.jobsMu.Unlock()
	s.poke()
	return nil
}

// Remove removes the jobs of the given names (unknown names are no-ops):
// no claim of their ticks starts after it returns but the ones in flight,
// which finish as they would.
func (s *Scheduler) Remove(names ...string) {
	s.jobsMu.Lock()
	for _, n := range names {
		if _, ok := s.jobs[n]; ok {
			s.stale.Add(1)
		}
		delete(s.jobs, n)
	}
	s.jobsMu.Unlock()
	s.poke()
}

// compactAtLeast is the fewest stale entries (of removed or replaced jobs)
// Run's queue is compacted for; beyond it, a quarter of the queue.
const compactAtLeast = 64

// compact drops from Run's queue h the entries that current would drop
// when they come due (a removed job's; a replaced definition's next tick),
// once they are many: each holds its job's old definition until its tick,
// a day for a daily runtime schedule that was deleted or changed, so a
// churn of schedules would grow the queue for as long as it went on. An
// entry it keeps is left as it is (current makes it for its job's
// definition when it comes due). O(queue) at most once per quarter of the
// queue gone stale.
func (s *Scheduler) compact(h *itemHeap) {
	n := s.stale.Load()
	if n < max(compactAtLeast, int64(h.Len()/4)) {
		return
	}
	s.stale.Add(-n)
	kept := (*h)[:0]
	for _, it := range *h {
		if _, ok := s.current(it); ok {
			kept = append(kept, it)
		}
	}
	clear((*h)[len(kept):]) // the dropped entries' jobs are garbage now
	*h = kept
	heap.Init(h)
}

// ForgetMarks deletes the marks (the latest tick decided) and the dispatch
// fences of jobs that are gone for good, such as deleted runtime
// schedules, on every lock master. A mark has no expiry: it lives as long
// as its job, and a deleted job's would stay; a fence lives a day, and
// under a steady churn of schedules the fences of deleted ones would fill
// the masters for a day. A fence seeded again should the job come back is
// above every fence issued before (quorum.Group.Forget). Remove the jobs
// first: a claim of theirs still under way may write a mark again (the
// next ForgetMarks of a replica that followed later takes it). Each master
// is bounded by the master timeout; the errors of those that failed are
// joined (their keys stay).
func (s *Scheduler) ForgetMarks(ctx context.Context, names ...string) error {
	marks := make([]string, len(names))
	fences := make([]string, len(names))
	for i, n := range names {
		k := newJobKeys(s.opts.namespace, n)
		marks[i], fences[i] = k.mark(), k.fence()
	}
	if err := s.g.Forget(ctx, s.opts.timeout, marks, fences); err != nil {
		return fmt.Errorf("scheduler: forget the marks on the lock masters: %w", err)
	}
	return nil
}

// poke wakes Run's loop, without waiting.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Jobs returns how many jobs the scheduler has.
func (s *Scheduler) Jobs() int {
	s.jobsMu.RLock()
	defer s.jobsMu.RUnlock()
	return len(s.jobs)
}

// job returns the job named name, if the scheduler has it.
func (s *Scheduler) job(name string) (*Job, bool) {
	s.jobsMu.RLock()
	defer s.jobsMu.RUnlock()
	j, ok := s.jobs[name]
	return j, ok
}

// snapshot returns the jobs as they are now.
func (s *Scheduler) snapshot() []*Job {
	s.jobsMu.RLock()
	defer s.jobsMu.RUnlock()
	out := make([]*Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, j)
	}
	return out
}

// startAdded takes the jobs Put while Run runs and returns the first claim
// of each (firstFrom).
func (s *Scheduler) startAdded(now time.Time) []item {
	s.jobsMu.Lock()
	added := s.added
	s.added = nil
	s.jobsMu.Unlock()
	var out []item
	for _, j := range added {
		if cur, ok := s.job(j.Name); !ok || cur != j {
			continue // removed or replaced again since
		}
		out = appendFirst(out, j, firstFrom(j, now))
	}
	return out
}

// startAll returns the first claim of every job as Run begins: from now
// for New's jobs and those Put before Run, from their Since for those Put
// since Run began (firstFrom). Both sets are taken under one lock, so that
// a Put racing the start gives its job one regular entry, not two.
func (s *Scheduler) startAll(now time.Time) []item {
	s.jobsMu.Lock()
	added := make(map[*Job]bool, len(s.added))
	for _, j := range s.added {
		added[j] = true
	}
	s.added = nil
	all := make([]*Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		all = append(all, j)
	}
	s.jobsMu.Unlock()
	out := make([]item, 0, len(all))
	for _, j := range all {
		from := now.Add(time.Nanosecond) // Next(now), as New's jobs start
		if added[j] {
			from = firstFrom(j, now)
		}
		out = appendFirst(out, j, from)
	}
	return out
}

// firstFrom is when a job Put while Run runs starts: its Since, but not
// before now less its starting deadline (an older tick would be missed)
// and not after now.
func firstFrom(j *Job, now time.Time) time.Time {
	from := now.Add(-j.StartingDeadline)
	if j.Since.After(from) {
		from = j.Since
	}
	if from.After(now) {
		from = now
	}
	return from
}

// appendFirst appends j's regular entry for its first tick at or after
// from, if it has one.
func appendFirst(out []item, j *Job, from time.Time) []item {
	if t := j.Schedule.Next(from.Add(-time.Nanosecond)); !t.IsZero() {
		out = append(out, item{job: j, at: t.UTC(), fireAt: t.Add(Jitter(j.Name, j.Jitter)), kind: kindNext})
	}
	return out
}

// current returns it made for its job's definition now, and false when it
// is to be dropped: its job was removed, or it is the regular entry of a
// replaced definition (the new one has its own) for a tick due at or after
// the new definition's Since. An older regular entry is claimed once, for
// the new definition, without scheduling a next tick. Any other claim not
// attempted yet of a tick due at or after Since that the new definition
// does not have is dropped as well.
// stillCurrent keeps the items of batch whose jobs are still current (each
// made for its job's current definition), not exhausted, and this replica's
// to claim: a leader-only job's only while it leads (a chunk that waited its
// turn may have waited past the lead).
func (s *Scheduler) stillCurrent(batch []item) []item {
	leads := s.opts.leader != nil && s.opts.leader()
	out := batch[:0]
	for _, it := range batch {
		if it, ok := s.current(it); ok && !s.isExhausted(it.job) && (leads || !it.job.LeaderOnly) {
			out = append(out, it)
		}
	}
	return out
}

func (s *Scheduler) current(it item) (item, bool) {
	cur, ok := s.job(it.job.Name)
	if !ok {
		return it, false
	}
	if cur == it.job {
		return it, true
	}
	if it.kind == kindNext {
		if !it.at.Before(cur.Since) {
			return it, false
		}
		it.kind = kindFirst
	}
	if it.token() == "" && !it.at.Before(cur.Since) && !cur.Schedule.Next(it.at.Add(-time.Nanosecond)).Equal(it.at) {
		// not claimed yet (a follower's claim waiting out its delay), due
		// after the change, and not a tick of the new definition: the
		// replicas that learned the change in time dropped it too
		return it, false
	}
	it.job = cur
	return it, true
}
