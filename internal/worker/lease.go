package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds what the lease-holding policies (forbid, replace,
// buffer_one, buffer_all) share: taking the job's execution lease, meeting
// the run that holds it, releasing it.

// tryLease takes job's execution lease for tick t if it is free. It returns
// the lease, for the policy to keep (held writes the holder record) or give
// back; or busy when another run holds it, for the policy to decide; or
// else (nil, false) the handler's result for a lease that could not be
// taken, recorded in the history.
func (e *engine) tryLease(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, log *slog.Logger) (lease *locking.Lease, busy bool, err error) {
	lease, err = e.locks.TryLock(ctx, locknames.Exec(job.Name), job.LockTTL)
	if err == nil {
		return lease, false, nil
	}
	if done, res := e.notObtained(ctx, job, t, attempt, err, log); done {
		return nil, false, res
	}
	return nil, true, nil
}

// takeOrMeet is how forbid and replace start: the lease taken (held), a
// failure to take it, or a holder that runs tick t itself (meetSameTick)
// end the acquire (done, with its result); else the lease is busy with
// another tick's run, b, for the policy to decide.
func (e *engine) takeOrMeet(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (g *grant, b busyLease, done bool, err error) {
	lease, busy, err := e.tryLease(ctx, job, t, attempt, log)
	switch {
	case lease != nil:
		return e.held(ctx, job, t, attempt, lease, log), b, true, nil
	case !busy:
		return nil, b, true, err
	}
	b = e.seeHolder(ctx, job.Name, log)
	if b.sameTick(t) {
		g, err = e.meetSameTick(ctx, job, t, attempt, retries, b, log)
		return g, b, true, err
	}
	return nil, b, false, nil
}

// busyLease is a job's execution lease held by another run, as a run that
// found it so sees it: the holder record, if it could be read.
type busyLease struct {
	h  holderRecord
	ok bool // the record was read
}

// seeHolder reads who holds job's busy lease.
func (e *engine) seeHolder(ctx context.Context, job string, log *slog.Logger) busyLease {
	h, ok := e.readHolder(ctx, job, log)
	return busyLease{h: h, ok: ok}
}

// attr is the holder as a log attribute.
func (b busyLease) attr() slog.Attr { return slog.String("holder", b.h.String()) }

// sameTick reports whether the holder runs tick t: an earlier attempt of it
// (asynq retried while it still runs), or a duplicate local dispatch.
func (b busyLease) sameTick(t scheduler.Tick) bool { return b.ok && b.h.ID == t.ID() }

// meetSameTick applies the rule every lease-holding policy shares when the
// holder runs tick t itself: with retries the attempt waits for the earlier
// one (and runs if it fails); without (a local run) it is a duplicate
// dispatch, skipped.
func (e *engine) meetSameTick(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, b busyLease, log *slog.Logger) (*grant, error) {
	if !retries {
		e.skipBusy(ctx, job, t, attempt, b, log)
		noteDuplicate(ctx) // the run under way ends the tick
		return nil, nil
	}
	log.Info("waiting for an earlier attempt of this tick", b.attr())
	lease, err := e.locks.Lock(ctx, locknames.Exec(job.Name), job.LockTTL)
	return e.obtained(ctx, job, t, attempt, lease, err, log)
}

// skipBusy records tick t skipped because another run holds the job.
func (e *engine) skipBusy(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, b busyLease, log *slog.Logger) {
	e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
	log.Info("skipped: another run holds the job", b.attr())
	// a holder that died keeps the lease until it runs out: say how long
	// that can be, so that a skip naming a gone replica is understood
	e.notStarted(ctx, job, t, attempt, jobs.StatusSkipped,
		fmt.Sprintf("another run holds the job: %s (a run whose replica died holds it until its lease runs out, within lock_ttl %s)", b.h.String(), job.LockTTL))
}

// skipStale records attempt of tick t skipped because a newer tick of the
// job (newer) came before it: under forbid the newest tick takes the job,
// not an older tick's retry.
func (e *engine) skipStale(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, newer time.Time, log *slog.Logger) {
	e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
	why := fmt.Sprintf("a retry of an older tick: the tick of %s came before it, and the newest tick takes the job (concurrency forbid)", newer.UTC().Format(time.RFC3339))
	log.Info("skipped: "+why, slog.Int("attempt", attempt))
	e.notStarted(ctx, job, t, attempt, jobs.StatusSkipped, why)
}

// obtained ends an acquire after a wait for the lease: the lease, recorded
// as held, or the handler's result for err.
func (e *engine) obtained(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, lease *locking.Lease, err error, log *slog.Logger) (*grant, error) {
	if err != nil {
		if done, res := e.notObtained(ctx, job, t, attempt, err, log); done {
			return nil, res
		}
		// Unreachable: Lock only gives up when ctx ends or masters fail.
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		return nil, fmt.Errorf("worker: %s: execution lease: %w", t.ID(), err)
	}
	return e.held(ctx, job, t, attempt, lease, log), nil
}

// notObtained turns a failed TryLock or Lock into the handler's result. done
// is false when the lock is merely held by another run (TryLock's busy case,
// for the caller to apply the policy).
func (e *engine) notObtained(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, err error, log *slog.Logger) (done bool, res error) {
	if cause := context.Cause(ctx); ctx.Err() != nil {
		if errors.Is(cause, ErrReplaced) {
			e.count(t.Job, func(c *counters) { c.replaced.Add(1) })
			log.Info("replaced by a newer tick while waiting for the job")
			e.notStarted(ctx, job, t, attempt, jobs.StatusReplaced, "replaced by a newer tick while waiting for the job")
			return true, fmt.Errorf("worker: %s: %w: %w", t.ID(), ErrReplaced, asynq.SkipRetry)
		}
		if stoppedOnRequest(cause) {
			// a stop request (its runtime schedule deleted) stops the runs
			// still waiting for the job as it stops the running ones:
			// recorded as stopped, not retried
			e.count(t.Job, func(c *counters) { c.stopped.Add(1) })
			log.Info("stopped on request while waiting for the job", slog.Any("why", cause))
			e.notStarted(ctx, job, t, attempt, jobs.StatusStopped, cause.Error()+" (while waiting for the job)")
			return true, fmt.Errorf("worker: %s: %w: %w", t.ID(), cause, asynq.SkipRetry)
		}
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		log.Warn("gave up waiting for the job", slog.Any("error", cause))
		e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, "gave up waiting for the execution lease: "+cause.Error())
		return true, fmt.Errorf("worker: %s: waiting for the execution lease: %w", t.ID(), errors.Join(err, cause))
	}
	var oe *locking.ObtainError
	if errors.As(err, &oe) && oe.Held() {
		return false, nil
	}
	e.count(t.Job, func(c *counters) { c.failed.Add(1) })
	log.Error("cannot take the execution lease", slog.Any("error", err))
	e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, "cannot take the execution lease: "+err.Error())
	return true, fmt.Errorf("worker: %s: execution lease: %w", t.ID(), err)
}

// releaseContext bounds the release of a run's lease by the job's lock_ttl,
// past the end of the run's own context.
func releaseContext(ctx context.Context, job *config.Job) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), job.LockTTL)
}

// givenBackWithEnd has g's lease released in the round trip of its run's
// end record (grant.giveBack) where the queue Redis is the only lock master:
// one round trip a run fewer. The policies whose release only releases the
// lease (forbid, replace) take it; the policy's release then finds the lease
// ended and sends nothing. Where the end record is not sent (no queue
// Redis), the policy's release sends the release; where its round trip
// does not land it, the release goes again on the lock client's own
// connections, bounded by the job's lock_ttl as the policy's release is,
// not by the record's round trip. On a Redis Cluster the release stays
// apart: a pipeline's commands to different nodes go in parallel, and the
// ledger record must land before the lease is free.
func (e *engine) givenBackWithEnd(g *grant, job *config.Job, log *slog.Logger) *grant {
	if g == nil || g.lease == nil || !e.queueMaster {
		return g
	}
	if _, cluster := e.rdb.(*redis.ClusterClient); cluster {
		return g
	}
	lease := g.lease
	g.giveBack = func(ctx context.Context, p redis.Pipeliner) func() {
		rctx, cancel := releaseContext(ctx, job)
		finish := lease.ReleaseIn(rctx, p)
		return func() {
			defer cancel()
			if err := finish(); err != nil && !errors.Is(err, locking.ErrNotHeld) {
				log.Warn("cannot release the execution lease (it expires at its ttl)", slog.Any("error", err))
			}
		}
	}
	return g
}

// releaseLease gives up a run's execution lease (token-checked) within ctx
// (see releaseContext).
func releaseLease(ctx context.Context, lease *locking.Lease, log *slog.Logger) {
	if err := lease.Release(ctx); err != nil && !errors.Is(err, locking.ErrNotHeld) {
		log.Warn("cannot release the execution lease (it expires at its ttl)", slog.Any("error", err))
	}
}

// The execution lease's holder record.
//
// Redis names (NS is Config.Namespace; the lock client adds its own prefix to
// lock names):
//
//	lock "exec:<job>"            the job's execution lease (all policies but
//	                             allow):
//	                             auto-extended, fenced; the lock client stores
//	                             it at <lock prefix>{exec:<job>}
//	NS:{exec:<job>}:holder       side record of the lease's holder, JSON
//	                             {id, tick, run_id, attempt, replica}, on the
//	                             queue Redis; PX = the job's lock_ttl, refreshed
//	                             every lock_ttl/3 while the lease lives
//
// The side record is advice, never safety: the lease alone keeps runs apart
// (G2). The record only decides whether a run that finds the lease busy
// waits (the holder is an earlier attempt of the same tick) or skips. It is
// written just after the lease is taken and left to expire after release, so
// for a moment it can name the previous holder; the worst outcome is that a
// retry waits for a run it could have skipped, or skips a tick whose earlier
// attempt is still running it.

// holderRecord is the value of the side record NS:{exec:<job>}:holder.
type holderRecord struct {
	V       int    `json:"v"`    // format version, formats.HolderRecord (absent: 1)
	ID      string `json:"id"`   // tick ID, job@RFC3339
	Tick    string `json:"tick"` // RFC 3339, UTC
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
	// Started is when the run took the lease (unix ms, the worker's
	// clock); absent in a record of an earlier release.
	Started int64 `json:"started,omitempty"`
}

// held records the new holder and keeps the record alive with the lease;
// the run holds the lease and its fence. The first write of the record
// goes with the run's start (grant.record), in one round trip with its
// history entry.
func (e *engine) held(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, lease *locking.Lease, log *slog.Logger) *grant {
	rec, _ := json.Marshal(holderRecord{V: formats.HolderRecord, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano), RunID: t.RunID,
		Attempt: attempt, Replica: e.replica, Started: time.Now().UnixMilli()})
	key := holderKey(e.cfg.Namespace, job.Name)
	set := func() {
		ctx := lease.Context()
		if err := e.rdb.Set(ctx, key, rec, job.LockTTL).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot write the holder record", slog.Any("error", err))
		}
	}
	e.wg.Go(func() { clock.Every(lease.Done(), e.clock, job.LockTTL/3, set) })
	// the start's round trip is bounded for the run's sake; a record it did
	// not land is written alone, for as long as the lease lives: a retry of
	// the tick that meets the lease reads it
	record := func(ctx context.Context, p redis.Pipeliner) func() {
		cmd := p.Set(ctx, key, rec, job.LockTTL)
		return func() {
			if cmd.Err() != nil {
				set()
			}
		}
	}
	return &grant{lease: lease, fence: lease.Fence(), record: record}
}

// readHolder reads the job's holder record; ok is false if there is none or
// it cannot be read.
func (e *engine) readHolder(ctx context.Context, job string, log *slog.Logger) (h holderRecord, ok bool) {
	v, err := e.rdb.Get(ctx, holderKey(e.cfg.Namespace, job)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			log.Warn("cannot read the holder record", slog.Any("error", err))
		}
		return h, false
	}
	if err := formats.Check("holder record", formats.HolderRecord, formats.VersionOf(v)); err != nil {
		// a later release's run holds the lease: held, by a holder unknown
		formats.Warn(log, err.(*formats.NewerError), "the job counts as held by a run unknown")
		return h, false
	}
	if err := json.Unmarshal(v, &h); err != nil {
		log.Warn("bad holder record", slog.Any("error", err))
		return h, false
	}
	return h, true
}

// Holder is a job's holder record as status reads it: the tick whose run
// holds the job's execution lease, and where it runs.
type Holder struct {
	Tick    time.Time
	RunID   string
	Attempt int
	Replica string
	Started time.Time // zero when the record does not say
}

// ReadHolders reads the holder records of jobs from the queue Redis rdb in
// one round trip, by job name; a job without one (or whose record does not
// parse, or is of a newer format than this release reads) is left out. The record outlives its run's release by up to the
// job's lock ttl: read it beside the lease.
func ReadHolders(ctx context.Context, rdb redis.UniversalClient, ns string, jobs []string) (map[string]Holder, error) {
	out := make(map[string]Holder, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(jobs))
	for i, j := range jobs {
		cmds[i] = pipe.Get(ctx, holderKey(ns, j))
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, j := range jobs {
		var h holderRecord
		v, err := cmds[i].Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			return out, fmt.Errorf("worker: read the holder record of %q: %w", j, err)
		case formats.VersionOf(v) > formats.HolderRecord || json.Unmarshal(v, &h) != nil:
			continue
		}
		tick, err := time.Parse(time.RFC3339Nano, h.Tick)
		if err != nil {
			continue
		}
		hd := Holder{Tick: tick, RunID: h.RunID, Attempt: h.Attempt, Replica: h.Replica}
		if h.Started > 0 {
			hd.Started = time.UnixMilli(h.Started).UTC()
		}
		out[j] = hd
	}
	return out, nil
}

// after reports whether the holder's tick is after at.
func (h holderRecord) after(at time.Time) bool {
	ht, err := time.Parse(time.RFC3339, h.Tick)
	return err == nil && ht.After(at)
}

// String formats the record for logs: "job@tick run=<id> attempt=<n> on <replica>",
// or "unknown".
func (h holderRecord) String() string {
	if h.ID == "" {
		return "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s run=%s attempt=%d", h.ID, h.RunID, h.Attempt)
	if h.Replica != "" {
		b.WriteString(" on " + h.Replica)
	}
	return b.String()
}
