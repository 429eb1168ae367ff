package worker

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the limits shared by jobs (config limits:, a job's
// limit:): a run of a job naming one holds a slot of the limit's semaphore
// on the lock masters, beside what its concurrency policy takes.
//
// Redis names (NS is Config.Namespace):
//
//	lock "sem:limit:<limit>#<i>"  slot i of the limit, a lock of the lock
//	                              library's semaphore: auto-extended,
//	                              fenced, released with the token check
//	NS:{limit:<limit>}:holder:<i> side record of slot i's holder, JSON
//	                              {v, job, id, tick, run_id, attempt,
//	                              replica, started, fence}, on the queue
//	                              Redis; PX = the job's lock_ttl, refreshed
//	                              every lock_ttl/3 while the slot is held,
//	                              deleted before the slot is released;
//	                              written and deleted by fence, never
//	                              over a later holder's (lua/slotholder.lua)
//
// As the execution lease's, the side record is advice: the slot's lock
// alone bounds the runs (status and the skip's why read the record).

// limitedPolicy is the policy of a job naming a limit: the job's own
// concurrency policy (what a run of the job takes first: a tick that finds
// the job busy is skipped at once, as without the limit), then a slot of
// the limit, waited for up to the tick's starting deadline (slotWait). A
// run that gets none is skipped, with why and who held the slots.
type limitedPolicy struct {
	policy // the job's concurrency policy
	e      *engine
	limit  string
	size   int
	sem    *locking.Semaphore
	err    error // the semaphore could not be made (a name the lock library refuses)
}

// limitedFor wraps p, job's concurrency policy, in job's limit, if it
// names one the config has.
func limitedFor(e *engine, job *config.Job, p policy) policy {
	name, size := e.cfg.LimitOf(job)
	if name == "" {
		return p
	}
	sem, err := e.locks.Semaphore(locknames.Limit(name), size)
	return limitedPolicy{policy: p, e: e, limit: name, size: size, sem: sem, err: err}
}

var (
	//go:embed lua/slotholder.lua
	slotHolderSrc    string
	slotHolderScript = redis.NewScript(slotHolderSrc)
)

// errSlotWait is the cause that ends a wait for a slot at its bound.
var errSlotWait = errors.New("worker: no slot of the limit within the tick's starting deadline")

// heldSlot is a slot of a limit a run holds.
type heldSlot struct {
	lease *locking.Lease
	slot  jobs.Slot
	key   string // the side record's key
}

// acquire takes what the job's policy takes, then a slot. A run that gets
// no slot gives back what the policy took.
func (p limitedPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	g, err := p.policy.acquire(ctx, job, t, attempt, retries, log)
	if g == nil {
		return nil, err
	}
	s, err := p.take(ctx, job, t, attempt, g, log)
	if s == nil {
		p.policy.release(ctx, job, t, g, log)
		return nil, err
	}
	g.slot = s
	g.record = runlog.Both(g.record, p.e.slotRecord(job, t, attempt, s, log))
	// the slot goes back before the job's lease (release): the job's next
	// run (a replacing tick waiting for the lease) finds it free, not held
	// by the run it follows, which its end record would have let go of the
	// job first
	g.giveBack = nil
	return g, nil
}

// release gives the slot back (its side record first), then what the
// job's policy took.
func (p limitedPolicy) release(ctx context.Context, job *config.Job, t scheduler.Tick, g *grant, log *slog.Logger) {
	if s := g.slot; s != nil {
		rctx, cancel := releaseContext(ctx, job)
		// only the run's own record: once its slot is lost another run
		// may hold the slot and have written its own
		if err := slotHolderScript.Run(rctx, p.e.rdb, []string{s.key}, "del", s.slot.Fence).Err(); err != nil {
			log.Warn("cannot delete the slot's holder record (it expires at the job's lock_ttl)", slog.Any("error", err))
		}
		if err := s.lease.Release(rctx); err != nil && !errors.Is(err, locking.ErrNotHeld) {
			log.Warn("cannot release the slot of the limit (it expires at its ttl)", slog.String("limit", p.limit), slog.Any("error", err))
		}
		cancel()
	}
	p.policy.release(ctx, job, t, g, log)
}

// take takes a free slot, or waits for one until the wait's bound
// (slotWait); a run that waits first writes the job's holder record (a
// tick of the job meeting its lease then reads who waits). It returns nil
// and the handler's result when no slot came, recorded in the history.
func (p limitedPolicy) take(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, g *grant, log *slog.Logger) (*heldSlot, error) {
	if p.err != nil {
		e := p.e
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, "limit "+strconv.Quote(p.limit)+": "+p.err.Error())
		return nil, fmt.Errorf("worker: %s: limit %q: %w: %w", t.ID(), p.limit, p.err, asynq.SkipRetry)
	}
	l, err := p.sem.TryAcquire(ctx, job.LockTTL)
	waited := false // the wait's bound passed
	if errors.Is(err, locking.ErrNotObtained) {
		if g.record != nil {
			pipe := p.e.rdb.Pipeline()
			check := g.record(ctx, pipe)
			_, _ = pipe.Exec(ctx)
			check()
		}
		bound := p.e.slotWait(job, t, attempt, g.waited)
		log.Info("waiting for a slot of the limit", slog.String("limit", p.limit), slog.Int("slots", p.size),
			slog.Duration("at_most", bound), slog.String("held_by", p.heldBy(ctx)))
		wctx, cancel := clock.WithTimeoutCause(ctx, p.e.clock, bound, errSlotWait)
		l, err = p.sem.Acquire(wctx, job.LockTTL)
		waited = err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errSlotWait)
		cancel()
	}
	if err == nil {
		s := &heldSlot{lease: l, slot: jobs.Slot{Limit: p.limit, Index: slotIndex(l.Key()), Fence: l.Fence()}}
		s.key = slotHolderKey(p.e.cfg.Namespace, p.limit, s.slot.Index)
		return s, nil
	}
	return nil, p.notTaken(ctx, job, t, attempt, err, waited, log)
}

// notTaken records and returns the result of a run that got no slot: its
// wait's bound passed (skipped), its context ended (replaced, stopped on
// request, shut down: as a wait for the lease that ended so) or the lock
// masters failed (failed, retried).
func (p limitedPolicy) notTaken(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, err error, waited bool, log *slog.Logger) error {
	e := p.e
	if waited {
		e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
		slots := fmt.Sprintf("its %d slots", p.size)
		if p.size == 1 {
			slots = "its 1 slot"
		}
		why := fmt.Sprintf("limit %q: %s stayed held until the tick's starting deadline (%s): held by %s",
			p.limit, slots, job.StartingDeadline, p.heldBy(ctx))
		log.Info("skipped: "+why, slog.String("limit", p.limit))
		e.notStarted(ctx, job, t, attempt, jobs.StatusSkipped, why)
		return nil
	}
	if cause := context.Cause(ctx); ctx.Err() != nil {
		if errors.Is(cause, ErrReplaced) || stoppedOnRequest(cause) {
			_, res := e.notObtained(ctx, job, t, attempt, err, log)
			return res
		}
		// shut down, or the task's own end: the run held the job, and
		// waited for a slot
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		log.Warn("gave up waiting for a slot of the limit", slog.String("limit", p.limit), slog.Any("error", cause))
		e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, fmt.Sprintf("gave up waiting for a slot of limit %q: %s", p.limit, cause))
		return fmt.Errorf("worker: %s: waiting for a slot of limit %q: %w", t.ID(), p.limit, errors.Join(err, cause))
	}
	e.count(t.Job, func(c *counters) { c.failed.Add(1) })
	log.Error("cannot take a slot of the limit", slog.String("limit", p.limit), slog.Any("error", err))
	e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, fmt.Sprintf("cannot take a slot of limit %q: %s", p.limit, err))
	return fmt.Errorf("worker: %s: limit %q: %w", t.ID(), p.limit, err)
}

// slotWait is how long attempt of tick t may wait for a slot: until the
// tick's starting deadline for a scheduled tick's first attempt (none once
// it passed: the slot was tried once already); a starting deadline from
// now for a retry, a manual or a backfilled tick, or one that waited for
// the job's lease on purpose (waited: a kept tick of a buffering job, a
// replacing tick), which started late on purpose.
func (e *engine) slotWait(job *config.Job, t scheduler.Tick, attempt int, waited bool) time.Duration {
	if attempt > 1 || t.Manual || t.Backfill || waited {
		return job.StartingDeadline
	}
	return max(t.At.Add(job.StartingDeadline).Sub(e.clock.Now()), 0)
}

// heldBy lists the slots' holders for a log line or a skip's why: "a@T on
// r1 (slot 0), b@T on r2 (slot 1)", "unknown" where a record cannot be read.
func (p limitedPolicy) heldBy(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	hs, err := ReadSlotHolders(rctx, p.e.rdb, p.e.cfg.Namespace, p.limit, p.size)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var parts []string
	for i, h := range hs {
		if h == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s@%s on %s (slot %d)", h.Job, h.Tick.Format(time.RFC3339), h.Replica, i))
	}
	if len(parts) == 0 {
		return "runs unknown"
	}
	return strings.Join(parts, ", ")
}

// slotRecord writes slot s's side record with the run's start (and alone
// if that round trip does not land it), and keeps it alive while the slot
// is held.
func (e *engine) slotRecord(job *config.Job, t scheduler.Tick, attempt int, s *heldSlot, log *slog.Logger) runlog.Also {
	rec, _ := json.Marshal(slotHolderRecord{V: formats.SlotHolderRecord, Job: job.Name, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano),
		RunID: t.RunID, Attempt: attempt, Replica: e.replica, Started: time.Now().UnixMilli(), Fence: s.slot.Fence})
	// never over the record of a run holding the slot after this one (a
	// higher fence): this one's slot may be lost before it knows
	args := []any{"set", s.slot.Fence, rec, job.LockTTL.Milliseconds()}
	set := func() {
		ctx := s.lease.Context()
		if err := slotHolderScript.Run(ctx, e.rdb, []string{s.key}, args...).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot write the slot's holder record", slog.Any("error", err))
		}
	}
	e.wg.Go(func() { clock.Every(s.lease.Done(), e.clock, job.LockTTL/3, set) })
	return func(ctx context.Context, p redis.Pipeliner) func() {
		cmd := slotHolderScript.Eval(ctx, p, []string{s.key}, args...)
		return func() {
			if cmd.Err() != nil {
				set()
			}
		}
	}
}

// slotIndex is the slot number of a semaphore slot's lock name
// ("sem:limit:NAME#i").
func slotIndex(lock string) int {
	i := strings.LastIndexByte(lock, '#')
	n, _ := strconv.Atoi(lock[i+1:])
	return n
}

// slotHolderRecord is the value of NS:{limit:<limit>}:holder:<i>.
type slotHolderRecord struct {
	V       int    `json:"v"` // formats.SlotHolderRecord
	Job     string `json:"job"`
	ID      string `json:"id"`   // tick ID, job@RFC3339
	Tick    string `json:"tick"` // RFC 3339, UTC
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
	Started int64  `json:"started"` // unix ms, the worker's clock
	Fence   int64  `json:"fence"`   // the slot's fencing token
}

// SlotHolder is the run holding a slot of a limit, as its side record
// says.
type SlotHolder struct {
	Job     string    `json:"job"`
	Tick    time.Time `json:"tick"`
	RunID   string    `json:"run_id"`
	Attempt int       `json:"attempt"`
	Replica string    `json:"replica"`
	Started time.Time `json:"started"`
	Fence   int64     `json:"fence"`
}

// ReadSlotHolders reads the side records of limit's slots 0 to size-1
// from the queue Redis rdb in one call: the holder of each slot, nil where
// there is none (or it does not parse, or is of a newer format). A record
// outlives a slot lost without a release by up to the job's lock ttl: read
// it beside the slot's lock.
func ReadSlotHolders(ctx context.Context, rdb redis.UniversalClient, ns, limit string, size int) ([]*SlotHolder, error) {
	out := make([]*SlotHolder, size)
	if size == 0 {
		return out, nil
	}
	keys := make([]string, size)
	for i := range keys {
		keys[i] = slotHolderKey(ns, limit, i)
	}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return out, fmt.Errorf("worker: read the slot holders of limit %q: %w", limit, err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok || formats.VersionOf([]byte(s)) > formats.SlotHolderRecord {
			continue
		}
		var r slotHolderRecord
		if json.Unmarshal([]byte(s), &r) != nil {
			continue
		}
		tick, err := time.Parse(time.RFC3339Nano, r.Tick)
		if err != nil {
			continue
		}
		out[i] = &SlotHolder{Job: r.Job, Tick: tick, RunID: r.RunID, Attempt: r.Attempt, Replica: r.Replica,
			Started: time.UnixMilli(r.Started).UTC(), Fence: r.Fence}
	}
	return out, nil
}

// watch has cancel stop the run when a lease it holds ends (the execution
// lease, the slot of its limit), with the lease's cause (a lost slot's
// wrapped in a *slotLost). It returns the run's validity, nil when it holds
// no lease, and what stops the watch.
func (g *grant) watch(cancel context.CancelCauseFunc) (executor.Validity, func()) {
	var held []*locking.Lease
	var stops []func() bool
	if l := g.lease; l != nil {
		held = append(held, l)
		stops = append(stops, context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) }))
	}
	if s := g.slot; s != nil {
		held = append(held, s.lease)
		stops = append(stops, context.AfterFunc(s.lease.Context(), func() {
			cancel(&slotLost{slot: s.slot, err: context.Cause(s.lease.Context())})
		}))
	}
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	switch len(held) {
	case 0:
		return nil, stop
	case 1:
		return held[0], stop
	}
	v := newLeases(held)
	return v, func() { stop(); v.stop() }
}

// slotLost is the cause that stops a run whose slot ended before it did.
type slotLost struct {
	slot jobs.Slot
	err  error
}

func (e *slotLost) Error() string {
	return fmt.Sprintf("slot %d of limit %q lost mid-run: %v", e.slot.Index, e.slot.Limit, e.err)
}

func (e *slotLost) Unwrap() error { return e.err }

// leases is the validity of a run holding more than one lease: its
// deadline the earliest of theirs, done when one of them is.
type leases struct {
	held  []*locking.Lease
	done  context.Context
	stops []func() bool
	end   context.CancelFunc
}

func newLeases(held []*locking.Lease) *leases {
	done, end := context.WithCancel(context.Background())
	v := &leases{held: held, done: done, end: end}
	for _, l := range held {
		v.stops = append(v.stops, context.AfterFunc(l.Context(), end))
	}
	return v
}

// Deadline is the earliest of the leases' deadlines.
func (v *leases) Deadline() time.Time {
	var d time.Time
	for _, l := range v.held {
		if ld := l.Deadline(); d.IsZero() || ld.Before(d) {
			d = ld
		}
	}
	return d
}

// Done is closed once one of the leases ended.
func (v *leases) Done() <-chan struct{} { return v.done.Done() }

func (v *leases) stop() {
	for _, f := range v.stops {
		f()
	}
	v.end()
}
