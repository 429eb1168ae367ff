package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/nearest"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runid"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/internal/singleton"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/schedule"
	"github.com/batonhq/baton/scheduler"
)

// Cluster reads a deployment's state from Redis and steers it: every job's
// schedule, last run and pause, every replica, the run history, the locks
// held, pauses. It needs no running replica: `baton status`, `history`,
// `locks`, `pause` and `resume` and the HTTP API are built on it.
type Cluster struct {
	cfg     *config.Config
	queue   redis.UniversalClient
	masters []redis.UniversalClient // the lock masters (the queue Redis when none are configured)
	locks   *locking.Client
	// the runtime schedules, which c.cfg's Job also finds (read from
	// Redis at each lookup)
	schedules *schedstore.Store
	closers   []func()
}

// NewCluster connects to cfg's queue Redis and lock masters (lazily: no
// round trip is made until a call needs one). Close releases them.
func NewCluster(cfg *config.Config) (*Cluster, error) {
	queue, _, err := wiring.QueueRedis(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{queue: queue, closers: []func(){func() { _ = queue.Close() }}}
	masters, err := wiring.DialMasters(cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	if len(masters) == 0 {
		masters = []redis.UniversalClient{queue}
	} else {
		c.closers = append(c.closers, func() { wiring.CloseAll(masters) })
	}
	// a put signs a version above the replicas' mark of its schedule, and
	// a schedule looked up (a trigger) is checked against it: the marks
	// of what the replicas saw, on the lock masters
	marks := schedstore.NewMasterMarks(masters, cfg.Namespace)
	c.schedules = schedstore.Of(queue, cfg).WithMarks(marks)
	c.cfg = cfg.WithSource(schedstore.NewFollower(c.schedules, cfg, nil, schedstore.WithFetch(), schedstore.WithMarks(marks)))
	c.masters = masters
	locks, err := locking.NewQuorum(masters, wiring.LockOptions(cfg)...)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.locks = locks
	c.closers = append(c.closers, func() { _ = locks.Close() })
	return c, nil
}

// Close closes the connections.
func (c *Cluster) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// Config is the config the cluster was opened with.
func (c *Cluster) Config() *config.Config { return c.cfg }

// Status is the state of a deployment at one moment.
type Status struct {
	// Time is when it was read, by the queue Redis's clock.
	Time time.Time `json:"time"`
	// Jobs are the job list's jobs, in file order (runtime schedules: see
	// Schedules).
	Jobs []JobStatus `json:"jobs"`
	// Replicas are the replicas seen in the last 10 minutes (the roster's memory).
	Replicas []ReplicaStatus `json:"replicas"`
	// ListDiffs are the jobs on which live replicas' job lists differ
	// (during a rolling deploy), one line each.
	ListDiffs []string `json:"list_diffs,omitempty"`
	// Warnings are what needs an operator's eye: tasks in a queue no live
	// replica consumes, a pause written to a minority of lock masters, ...
	Warnings []string `json:"warnings,omitempty"`
	// Schedules summarises the runtime schedules (nil when it cannot be
	// read): how many, how many paused, and the ones a replica refuses.
	// Jobs lists the job list's jobs only.
	Schedules *SchedulesStatus `json:"schedules,omitempty"`
	// Masters are the lock masters (the queue Redis when none are
	// configured): whether each votes, and if not why and until when (see
	// MastersAttention).
	Masters []locking.MasterStatus `json:"masters"`
	// Limits are the limits shared by jobs (config limits:), by name: the
	// slots held now and the runs holding them.
	Limits []LimitStatus `json:"limits,omitempty"`
}

// MastersAttention is one line per lock master that does not vote now: in
// its restart quarantine, waiting for its repair, or unreachable; with why,
// until when, and for a master found without a marker how a brand-new set
// skips the wait. None when every master votes.
func (st *Status) MastersAttention() []string {
	var out []string
	for _, m := range st.Masters {
		switch m.State {
		case locking.MasterQuarantine, locking.MasterRepairing:
			what := "in its restart quarantine"
			if m.State == locking.MasterRepairing {
				what = "not marked yet (the first replica marks it, then it waits out its restart quarantine)"
			}
			line := fmt.Sprintf("lock master %d (%s) %s until %s by its clock (in %s): %s", m.Index, m.Addr, what,
				m.Until.UTC().Format(time.RFC3339), time.Until(m.UntilLocal).Round(time.Second), m.Why)
			if m.Why == locking.WhyNoMarker {
				line += "; it ends by itself (a brand-new set of masters skips it only when marked with `baton init --config FILE` before any replica starts)"
			}
			out = append(out, line)
		case locking.MasterUnreachable:
			out = append(out, fmt.Sprintf("lock master %d (%s) unreachable: %s", m.Index, m.Addr, m.Err))
		}
	}
	return out
}

// JobStatus is one job's state.
type JobStatus struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Schedule string `json:"schedule,omitempty"`
	// Hashed is Schedule with its H resolved for this job (config.Job's
	// Hashed); empty when it has none.
	Hashed string `json:"hashed,omitempty"`
	// After names the jobs it runs after (a chain: config.Job's After),
	// whose ticks are its own; OnParentFailure is its policy then.
	After           []string `json:"after,omitempty"`
	OnParentFailure string   `json:"on_parent_failure,omitempty"`
	Timezone        string   `json:"timezone,omitempty"`
	// Exclude and Only name the calendars whose days it excludes or runs
	// only on (config.Job's).
	Exclude []string `json:"exclude,omitempty"`
	Only    []string `json:"only,omitempty"`
	// DST is its policy on days the clocks change, when not vixie.
	DST string `json:"dst,omitempty"`
	// At is a one-shot job's single tick (RFC 3339, as configured).
	At string `json:"at,omitempty"`
	// Next is its next tick (zero for a singleton or a spec with none).
	Next time.Time `json:"next,omitzero"`
	// NextTicks are its next ticks, Next first, up to nextTicksListed of them
	// (fewer when its schedule has fewer ahead, or max_runs stops it
	// sooner).
	NextTicks []time.Time `json:"next_ticks,omitempty"`
	// MaxRuns is the job's max_runs (0: no limit) and Runs how many of its
	// ticks were dispatched toward it, across replicas.
	MaxRuns int `json:"max_runs,omitempty"`
	Runs    int `json:"runs,omitempty"`
	// Done says why the job takes no more ticks (its one tick passed, it
	// ran max_runs ticks, its end passed); empty while it has ticks ahead.
	Done string `json:"done,omitempty"`
	// Paused says whether its ticks are skipped now. PausedBy is "config"
	// (paused: true) or who paused it with baton pause (Cluster.Pause),
	// PausedSince since when and PauseNote why (the operator's text: escape
	// it to show it); for a flag without a note, PausedBy is "baton pause".
	// PausedUntil is when a pause with an end ends by itself (zero: none).
	Paused      bool      `json:"paused"`
	PausedBy    string    `json:"paused_by,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
	PauseNote   string    `json:"pause_note,omitempty"`
	// Last is the newest entry of its history (a run or a tick that did
	// not run); nil when it has none.
	Last *jobs.RunRecord `json:"last,omitempty"`
	// Running are the runs its history shows started and not ended.
	Running []jobs.RunRecord `json:"running,omitempty"`
	// Lock is its execution lease (or, for a singleton, its election's
	// lock) when held.
	Lock *locking.HeldLock `json:"lock,omitempty"`
	// Leader is a singleton's current holder.
	Leader *locking.Leader `json:"leader,omitempty"`
	// FailureStreak is how many of its runs failed (failed, timed out,
	// lease lost) since its last success, as far back as the history
	// reaches (history.runs, history.max_age).
	FailureStreak int `json:"failure_streak,omitempty"`
	// LastSuccess is when its newest successful run ended; zero when the
	// history has none.
	LastSuccess time.Time `json:"last_success,omitzero"`
}

// ReplicaStatus is one replica as the roster has it.
type ReplicaStatus struct {
	ID       string    `json:"id"`
	Version  string    `json:"version"`
	Role     string    `json:"role"`
	ListHash string    `json:"list_hash"`
	Queues   []string  `json:"queues"`
	LastSeen time.Time `json:"last_seen"`
	Live     bool      `json:"live"`
	// Skew is how far its clock is ahead of the queue Redis's (negative:
	// behind).
	Skew time.Duration `json:"skew"`
	// Differs is true when its job list is not the one most live
	// replicas run.
	Differs bool `json:"differs"`
	// NewerFormat is its roster entry's format version when that is newer
	// than this release reads (a replica of a later release): then only
	// ID, LastSeen and Live are read, and Version says so.
	NewerFormat int `json:"newer_format,omitempty"`
}

// historyScan is how many history records Status reads per job to find the
// runs under way.
const historyScan = 20

// statusStep bounds each of Status's reads of the lock masters, and each
// master's write of a pause.
const statusStep = 3 * time.Second

// Status reads the deployment's state. Parts that cannot be read (a lock
// master down) are left out and said in the error, which wraps
// locking.ErrUnavailable when the queue Redis or a quorum of lock masters
// did not answer.
//
// It reads the queue Redis's time, gathers what the jobs' lines come from
// (gather), derives each job's line from that (statusReads.jobStatus),
// then reads the roster for the replicas' lines (readReplicas).
func (c *Cluster) Status(ctx context.Context) (*Status, error) {
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: queue Redis %s: %w", locking.ErrUnavailable, wiring.DescribeRedis(c.cfg), err)
	}
	st := &Status{Time: now.UTC()}
	r, errs := c.gather(ctx, st, now)
	for i := range c.cfg.Jobs {
		js, warning := r.jobStatus(&c.cfg.Jobs[i])
		if warning != "" {
			st.Warnings = append(st.Warnings, warning)
		}
		st.Jobs = append(st.Jobs, js)
	}
	if st.Limits, err = c.limitsStatus(ctx, r.heldBy); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.readReplicas(ctx, st)...)
	return st, errors.Join(errs...)
}

// statusReads is what Status gathers before it derives the jobs' lines.
type statusReads struct {
	now       time.Time                    // by the queue Redis's clock
	masters   int                          // the number of lock masters
	paused    map[string]pauseState        // pause flags, by job
	heldBy    map[string]*locking.HeldLock // the locks held, by lock name
	leaders   map[string]*locking.Leader   // singletons' leaders, by job
	replicas  replicaSet                   // the roster, as a run's reader sees it
	histories map[string][]jobs.RunRecord  // the newest historyScan records, by job
	full      map[string][]jobs.RunRecord  // the whole history of the jobs failing lately
	holdersOf map[string]worker.Holder     // execution leases' holder records, by job
	counted   map[string]int               // ticks dispatched toward max_runs, by job
}

// gather reads what the jobs' lines are derived from: first the parts read
// side by side (gatherBounded), then from the queue Redis, one after
// another, the jobs' newest history records, the holder records of the
// execution leases held, the run counts, and the whole history of the
// jobs failing lately. It returns the errors in that order; what failed is
// left empty.
func (c *Cluster) gather(ctx context.Context, st *Status, now time.Time) (*statusReads, []error) {
	names := make([]string, len(c.cfg.Jobs))
	for i, j := range c.cfg.Jobs {
		names[i] = j.Name
	}
	r := &statusReads{now: now, masters: len(c.masters)}
	errs := c.gatherBounded(ctx, st, r, names)
	var err error
	if r.histories, err = history.ReadJobs(ctx, c.queue, c.cfg.Namespace, names, historyScan); err != nil {
		errs = append(errs, err)
	}
	if r.holdersOf, err = c.leaseHolders(ctx, r.heldBy); err != nil {
		errs = append(errs, err)
	}
	if r.counted, err = c.runCounts(ctx); err != nil {
		errs = append(errs, err)
	}
	if r.full, err = c.failingHistories(ctx, r.histories); err != nil {
		errs = append(errs, err)
	}
	return r, errs
}

// gatherBounded reads side by side, each within its own statusStep (a
// master that hangs costs statusStep, not the whole status): from the
// lock masters the pause flags, the locks held, the singletons' holders
// and the masters' states (into st.Masters), and the roster (a failed
// read tells nothing). It returns the errors of the first three, in that
// order; singleton leaders unknown during the masters' restart quarantine
// are a warning in st, not an error.
func (c *Cluster) gatherBounded(ctx context.Context, st *Status, r *statusReads, names []string) []error {
	var (
		held             []locking.HeldLock
		holders          []singleton.Holder
		pErr, hErr, sErr error
		wg               sync.WaitGroup
	)
	bounded := func(f func(ctx context.Context)) {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, statusStep)
			defer cancel()
			f(sctx)
		})
	}
	bounded(func(ctx context.Context) { r.paused, pErr = c.pauseStates(ctx, names) })
	bounded(func(ctx context.Context) { held, hErr = c.locks.Held(ctx) })
	bounded(func(ctx context.Context) { holders, sErr = singleton.New(c.cfg, c.locks, nil).Holders(ctx) })
	bounded(func(ctx context.Context) { st.Masters = c.locks.Masters(ctx) })
	bounded(func(ctx context.Context) { r.replicas = c.replicaSet(ctx) })
	wg.Wait()
	if errors.Is(sErr, locking.ErrQuarantine) {
		// the normal first minute of brand-new masters (and a restart's):
		// the masters' lines say why and until when; no failed status
		st.Warnings = append(st.Warnings, "singleton leaders are not known until the lock masters' restart quarantine ends")
		sErr = nil
	}
	r.heldBy, r.leaders = heldByName(held), leadersByJob(holders)
	var errs []error
	for _, err := range []error{pErr, hErr, sErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// heldByName indexes the locks held by their names.
func heldByName(held []locking.HeldLock) map[string]*locking.HeldLock {
	heldBy := map[string]*locking.HeldLock{}
	for i := range held {
		heldBy[held[i].Name] = &held[i]
	}
	return heldBy
}

// leadersByJob indexes the singletons' leaders by job; a holder that does
// not lead is left out.
func leadersByJob(holders []singleton.Holder) map[string]*locking.Leader {
	leaders := map[string]*locking.Leader{}
	for _, h := range holders {
		if h.Leading {
			leaders[h.Job] = &h.Leader
		}
	}
	return leaders
}

// jobStatus derives job j's line from the reads: its ticks, its pause,
// its runs and its leader. The warning is a pause flag found on some lock
// masters but not on a majority; "" when there is none.
func (r *statusReads) jobStatus(j *config.Job) (js JobStatus, warning string) {
	js = JobStatus{Name: j.Name, Mode: string(j.Mode), Schedule: j.Schedule, Hashed: j.Hashed, Timezone: j.Location.String(), Exclude: j.Exclude, Only: j.Only,
		After: j.After, OnParentFailure: string(j.OnParentFailure)}
	if j.DST != "" && j.DST != schedule.DSTVixie {
		js.DST = string(j.DST)
	}
	r.ticks(j, &js)
	warning = r.pause(j, &js)
	r.runs(j, &js)
	js.Leader = r.leaders[j.Name]
	return js, warning
}

// ticks derives j's ticks ahead: Next and NextTicks, its max_runs and the
// ticks dispatched toward them, and Done when it takes no more ticks.
func (r *statusReads) ticks(j *config.Job, js *JobStatus) {
	if j.Mode != config.ModeSingleton && j.Sched != nil {
		js.Next = j.Sched.Next(r.now).UTC()
	}
	js.At, js.MaxRuns, js.Runs = j.At, j.MaxRuns, r.counted[j.Name]
	js.Done = done(j, *js, r.now)
	if js.Done != "" {
		js.Next = time.Time{} // no tick ahead
	}
	js.NextTicks = nextTicks(j, *js)
}

// pause derives whether j is paused and by whom: by its config, or by
// baton pause on a majority of the lock masters (with who, since when and
// why, when the flag has a note). A flag on a minority pauses nothing: it
// is returned as a warning.
func (r *statusReads) pause(j *config.Job, js *JobStatus) (warning string) {
	p := r.paused[j.Name]
	switch {
	case j.Paused:
		js.Paused, js.PausedBy = true, "config"
	case p.masters >= r.masters/2+1:
		js.Paused, js.PausedBy = true, "baton pause"
		if n := p.note; n != nil {
			js.PausedBy, js.PausedSince, js.PausedUntil, js.PauseNote = n.By, n.At, n.Until, n.Note
		}
	case p.masters > 0:
		return fmt.Sprintf("job %s is paused on %d of %d lock masters, not a majority: run baton pause or resume again",
			j.Name, p.masters, r.masters)
	}
	return ""
}

// runs derives j's runs from its history and its lease: Last, the failure
// streak and last success, Lock, and Running: the runs the history shows
// started that can still be running, plus an attempt whose lease and
// holder record say it runs before its start is recorded.
func (r *statusReads) runs(j *config.Job, js *JobStatus) {
	recs := r.histories[j.Name]
	if len(recs) > 0 {
		// as baton history says it: a run whose worker is gone is
		// unknown (a copy: the records below are as recorded)
		last := recs[0]
		if last.Status == jobs.StatusRunning {
			if why := unknownWhy(j, last, r.now, func() replicaSet { return r.replicas }); why != "" {
				last.Status, last.Reason = jobs.StatusUnknown, why
			}
		}
		js.Last = &last
	}
	js.FailureStreak, js.LastSuccess = failureStreak(r.full[j.Name], recs)
	js.Lock = r.heldBy[locknames.Held(j)]
	for _, rec := range recs {
		if rec.Status == jobs.StatusRunning && stillRunning(j, rec, js.Lock, r.now) && !r.replicas.gone(rec) {
			js.Running = append(js.Running, rec)
		}
	}
	if h, ok := r.holdersOf[j.Name]; ok && !historyHas(recs, h.RunID, h.Attempt) {
		// an attempt within history.start_after has written no start
		// yet: its lease and holder record say it runs (in place of an
		// earlier attempt of its run that the history shows running)
		js.Running = slices.DeleteFunc(js.Running, func(rec jobs.RunRecord) bool { return rec.RunID == h.RunID })
		js.Running = append(js.Running, jobs.RunRecord{Job: j.Name, Tick: h.Tick, RunID: h.RunID, Worker: h.Replica,
			Attempt: h.Attempt, Started: h.Started, Status: jobs.StatusRunning})
	}
}

// readReplicas reads the roster and derives from it st's replica lines,
// the jobs on which live replicas' job lists differ, the runtime
// schedules' summary, and the warnings of queues no live replica consumes
// and of a replica id two live processes run as. It returns the errors of
// the roster and of the schedules' summary.
func (c *Cluster) readReplicas(ctx context.Context, st *Status) []error {
	var errs []error
	members, err := roster.Read(ctx, c.queue, c.cfg.Namespace)
	if err != nil {
		errs = append(errs, fmt.Errorf("baton: %w", err))
	}
	st.Replicas, st.ListDiffs = replicaStatus(members)
	if st.Schedules, err = c.schedulesStatus(ctx, members); err != nil {
		errs = append(errs, err)
	}
	st.Warnings = append(st.Warnings, c.orphanQueues(members)...)
	for _, id := range roster.DuplicateIDs(members) {
		st.Warnings = append(st.Warnings, fmt.Sprintf("two live processes run as replica %s: give each its own id", redact.Quote(id)))
	}
	return errs
}

// failingHistories reads, in one more pipelined round trip, the whole
// history of each job whose newest records (histories) failed and hold no
// success, so that its failure streak and last success are told in full;
// nothing for jobs that succeeded lately.
func (c *Cluster) failingHistories(ctx context.Context, histories map[string][]jobs.RunRecord) (map[string][]jobs.RunRecord, error) {
	var more []string
	for job, recs := range histories {
		if n, ok := jobs.FailureStreak(recs); n > 0 && ok == nil {
			more = append(more, job)
		}
	}
	if len(more) == 0 {
		return nil, nil
	}
	return history.ReadJobs(ctx, c.queue, c.cfg.Namespace, more, 0)
}

// failureStreak is a job's failure streak and the end of its last success,
// from its whole history when read (all), else from recs.
func failureStreak(all, recs []jobs.RunRecord) (int, time.Time) {
	if all != nil {
		recs = all
	}
	n, ok := jobs.FailureStreak(recs)
	if ok == nil {
		return n, time.Time{}
	}
	return n, ok.Ended
}

// runCounts reads, for each job with max_runs, how many of its ticks were
// dispatched toward it.
func (c *Cluster) runCounts(ctx context.Context) (map[string]int, error) {
	cmds := map[string]*redis.StringCmd{}
	pipe := c.queue.Pipeline()
	for _, j := range c.cfg.Jobs {
		if j.MaxRuns > 0 {
			cmds[j.Name] = pipe.Get(ctx, handoff.RunCountKeys(c.cfg.Namespace, j.Name)[0])
		}
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("baton: run counts: %w", err)
	}
	out := make(map[string]int, len(cmds))
	var corrupt []error
	for name, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("baton: run count of %s: %w", name, err)
		}
		n, ok := quorum.ParseCounter(v)
		if !ok {
			corrupt = append(corrupt, &jobs.CorruptError{Key: handoff.RunCountKeys(c.cfg.Namespace, name)[0], Value: redact.Cut(v),
				Want: "an integer from 0 to 2^53-2 (the job's run count toward max_runs)"})
			continue
		}
		out[name] = int(n)
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("baton: run counts: %w", errors.Join(corrupt...))
	}
	return out, nil
}

// nextTicksListed is how many ticks ahead JobStatus.NextTicks lists.
const nextTicksListed = 10

// nextTicks lists job j's next ticks from js.Next on: up to nextTicksListed,
// and no more than the runs max_runs leaves it.
func nextTicks(j *config.Job, js JobStatus) []time.Time {
	n := nextTicksListed
	if j.MaxRuns > 0 {
		n = min(n, j.MaxRuns-js.Runs)
	}
	var out []time.Time
	for t := js.Next; !t.IsZero() && len(out) < n; t = j.Sched.Next(t) {
		out = append(out, t.UTC())
	}
	return out
}

// done says why job j (its status so far in js) takes no more ticks at
// now, or "" while it has some ahead.
func done(j *config.Job, js JobStatus, now time.Time) string {
	switch {
	case j.Mode == config.ModeSingleton || j.Sched == nil:
		return ""
	case j.MaxRuns > 0 && js.Runs >= j.MaxRuns:
		return fmt.Sprintf("ran its max_runs (%d) ticks", j.MaxRuns)
	case !js.Next.IsZero():
		return ""
	case j.At != "":
		return "its one tick (at " + j.At + ") has passed"
	case j.End != "":
		return "its end (" + j.End + ") has passed"
	}
	return "no more ticks"
}

// historyHas tells whether the history records recs hold attempt attempt
// of run id run, or a later one: the attempt is shown from them (running,
// or ended: a holder record outlives its run by up to the lock ttl when the
// release is lost).
func historyHas(recs []jobs.RunRecord, run string, attempt int) bool {
	for _, r := range recs {
		if r.RunID == run && r.Attempt >= attempt {
			return true
		}
	}
	return false
}

// leaseHolders reads the holder records of the jobs whose execution lease
// heldBy shows held on a quorum of masters, by job name.
func (c *Cluster) leaseHolders(ctx context.Context, heldBy map[string]*locking.HeldLock) (map[string]worker.Holder, error) {
	var leased []string
	for i := range c.cfg.Jobs {
		j := &c.cfg.Jobs[i]
		if l := heldBy[locknames.Held(j)]; l != nil && l.Masters >= l.Quorum && j.Mode != config.ModeSingleton {
			leased = append(leased, j.Name)
		}
	}
	return worker.ReadHolders(ctx, c.queue, c.cfg.Namespace, leased)
}

// stillRunning tells whether a run the history shows started and not ended
// can still be running: a run of a job that holds a lease (forbid, replace,
// singleton) runs only while the lease is held on a quorum; any run ends at
// the job's timeout. A worker that died mid-run wrote no end: its record
// stays "running" in the history, but not in the status.
func stillRunning(j *config.Job, r jobs.RunRecord, lock *locking.HeldLock, now time.Time) bool {
	if j.Timeout > 0 && now.After(r.Started.Add(j.Timeout+time.Minute)) {
		return false
	}
	if locknames.Held(j) != "" && (lock == nil || lock.Masters < lock.Quorum) {
		return false
	}
	return true
}

// replicaStatus turns the roster into replica lines, marking the replicas
// whose job list is not the most common among live ones. An entry that is
// no longer live beside a live one of the same replica id (its previous
// process: a replica restarted under its id) is left out.
func replicaStatus(members []roster.Member) ([]ReplicaStatus, []string) {
	count := map[string]int{}
	liveIDs := map[string]bool{}
	for _, m := range members {
		if m.Live {
			count[m.Hash]++
			liveIDs[m.ID] = true
		}
	}
	common := ""
	for h, n := range count {
		if n > count[common] || (n == count[common] && h < common) {
			common = h
		}
	}
	out := make([]ReplicaStatus, 0, len(members))
	for _, m := range members {
		if !m.Live && liveIDs[m.ID] {
			continue
		}
		rs := ReplicaStatus{ID: m.ID, Version: m.Version, Role: m.Role, ListHash: m.Hash, Queues: m.Queues,
			LastSeen: m.Seen.UTC(), Live: m.Live, Skew: time.Duration(m.SkewMS) * time.Millisecond,
			Differs: m.Live && len(count) > 1 && m.Hash != common}
		if m.Newer > 0 {
			// its entry's members may mean something else: read none
			rs.NewerFormat = m.Newer
			rs.Version = fmt.Sprintf("a later release (roster entry format %d; this one reads %d)", m.Newer, formats.RosterEntry)
			rs.Role = "unknown"
		}
		out = append(out, rs)
	}
	var diffs []string
	for _, d := range roster.DiffLists(members) {
		diffs = append(diffs, d.String())
	}
	return out, diffs
}

// orphanQueues lists this namespace's queues that hold tasks no live
// replica consumes: they wait forever (a job moved to another queue while
// its old queue still held tasks, or a queue dropped from worker.queues).
func (c *Cluster) orphanQueues(members []roster.Member) []string {
	consumed := map[string]bool{}
	for _, m := range members {
		for _, q := range m.Queues {
			if m.Live {
				for _, lane := range c.cfg.QueueLanes(q) {
					consumed[lane] = true
				}
			}
		}
	}
	insp := asynq.NewInspectorFromRedisClient(c.queue)
	names, err := insp.Queues()
	if err != nil {
		return nil
	}
	var out []string
	for _, q := range names {
		if consumed[q] || !strings.HasPrefix(q, c.cfg.Namespace+":") {
			continue // consumed, or another deployment's
		}
		if info, err := insp.GetQueueInfo(q); err == nil && info.Pending+info.Scheduled+info.Retry > 0 {
			out = append(out, fmt.Sprintf("queue %q holds %d pending, %d scheduled and %d retry tasks, but no live replica consumes it: add it to worker.queues",
				q, info.Pending, info.Scheduled, info.Retry))
		}
	}
	return out
}

// History returns up to n of job's newest runs and not-run ticks (n <= 0:
// all kept), newest tick first.
func (c *Cluster) History(ctx context.Context, job string, n int) ([]jobs.RunRecord, error) {
	// a runtime schedule's history outlives its delete until it expires
	if _, ok := c.cfg.Job(job); !ok && !isScheduleName(job) {
		return nil, fmt.Errorf("%w: no job %q in the config", ErrUnknownJob, job)
	}
	recs, err := history.Read(ctx, c.queue, c.cfg.Namespace, job, n)
	c.markUnknownRuns(ctx, func(string) *config.Job {
		j, _ := c.cfg.Job(job)
		return j
	}, recs)
	return recs, err
}

// markUnknownRuns turns each run of lists recorded running that has no
// end to come (see unknownWhy: past its job's timeout, by jobOf, or its
// worker gone) into jobs.StatusUnknown, with why: the history then says
// what the ledger says, not "running" until newer runs trim it. It reads
// the queue Redis's clock and the roster once, only when a run is
// recorded running; what cannot be read leaves them as recorded.
func (c *Cluster) markUnknownRuns(ctx context.Context, jobOf func(job string) *config.Job, lists ...[]jobs.RunRecord) {
	var now time.Time
	read := false
	replicas := sync.OnceValue(func() replicaSet { return c.replicaSet(ctx) })
	for _, recs := range lists {
		for i := range recs {
			r := &recs[i]
			if r.Status != jobs.StatusRunning {
				continue
			}
			if !read {
				read = true
				if t, err := c.queue.Time(ctx).Result(); err == nil {
					now = t
				}
			}
			if why := unknownWhy(jobOf(r.Job), *r, now, replicas); why != "" {
				r.Status, r.Reason = jobs.StatusUnknown, why
			}
		}
	}
}

// Locks lists the locks held now on the lock masters (see locking.Held):
// execution leases ("exec:JOB"), singleton elections, `baton lock` locks.
func (c *Cluster) Locks(ctx context.Context) ([]locking.HeldLock, error) {
	return c.locks.Held(ctx)
}

// isScheduleName tells whether job is a runtime schedule's job name ("@"
// and a valid id), whether or not the schedule exists.
func isScheduleName(job string) bool {
	id, ok := config.ScheduleID(job)
	return ok && config.CheckScheduleID(id) == nil
}

// UnknownJobHint says what a job name the config does not have was
// probably meant to be: the runtime schedule of that id ("@" + job), or
// the nearest job of the list; "" when nothing is near.
func (c *Cluster) UnknownJobHint(job string) string {
	if !strings.HasPrefix(job, "@") && config.CheckScheduleID(job) == nil {
		if _, ok := c.cfg.Job(config.ScheduleJobName(job)); ok {
			return fmt.Sprintf("did you mean %s (runtime schedule %s's job)?", config.ScheduleJobName(job), job)
		}
	}
	names := make([]string, len(c.cfg.Jobs))
	for i, j := range c.cfg.Jobs {
		names[i] = j.Name
	}
	if near := nearest.Name(job, names); near != "" {
		return fmt.Sprintf("did you mean %s?", near)
	}
	return ""
}

// ErrUnknownJob is returned for a job name the config does not have.
var ErrUnknownJob = errors.New("baton: unknown job")

// dispatcher hands ticks to the queue as a replica's scheduler does (signed,
// bound to one queue), for triggers and backfills.
func (c *Cluster) dispatcher() *handoff.Sender {
	return handoff.New(c.cfg, asynq.NewClientFromRedisClient(c.queue), nil, handoff.WithQueueRedis(c.queue))
}

// ErrNotTriggerable is returned by Trigger for a job that cannot be run by
// hand: a singleton (it runs all the time) or a local job (it runs in a
// scheduler replica's process, which a trigger cannot reach).
var ErrNotTriggerable = errors.New("baton: job cannot be triggered")

// Trigger dispatches a manual run of job now, through the dispatch path of
// scheduled ticks: the run is signed and enqueued like one, a worker runs it
// under the job's concurrency policy (forbid skips it while the job runs,
// replace stops the running one), and the history records it as manual.
// Its tick is the current instant (to the millisecond) by the queue Redis's
// clock and it has its own run id, so it is never a scheduled tick's duplicate, and triggering
// twice runs twice. by names who triggered it (the dispatching "replica" in
// the history). A paused job runs too: the trigger is explicit.
func (c *Cluster) Trigger(ctx context.Context, job, by string) (scheduler.Tick, error) {
	j, ok := c.cfg.Job(job)
	switch {
	case !ok:
		return scheduler.Tick{}, fmt.Errorf("%w: no job %q in the config", ErrUnknownJob, job)
	case j.Mode != config.ModeCron:
		return scheduler.Tick{}, fmt.Errorf("%w: %q is a %s job; only cron jobs (run through the queue) can be triggered", ErrNotTriggerable, job, j.Mode)
	}
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return scheduler.Tick{}, fmt.Errorf("%w: queue Redis %s: %w", locking.ErrUnavailable, wiring.DescribeRedis(c.cfg), err)
	}
	// to the millisecond: a trigger is newer than a scheduled tick of the
	// same second, and than an earlier trigger (replace stops those)
	t := scheduler.Tick{Job: job, At: now.UTC().Truncate(time.Millisecond), RunID: runid.New(), Replica: by, Manual: true}
	if err := c.dispatcher().Dispatch(ctx, t); err != nil {
		return scheduler.Tick{}, err
	}
	return t, nil
}
