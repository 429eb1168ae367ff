package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the concurrency policies: how a run of a job meets another
// run of the same job, cluster-wide.
//
// Redis names (NS is Config.Namespace; the lock client adds its own prefix to
// lock names):
//
//	lock "exec:<job>"            the job's execution lease (forbid, replace):
//	                             auto-extended, fenced; the lock client stores
//	                             it at <lock prefix>{exec:<job>}
//	NS:{exec:<job>}:holder       side record of the lease's holder, JSON
//	                             {id, tick, run_id, attempt, replica}, on the
//	                             queue Redis; PX = the job's lock_ttl, refreshed
//	                             every lock_ttl/3 while the lease lives
//	NS:cancel:<job>              pub/sub channel of replace requests, JSON
//	                             {id, tick, replica}, on the queue Redis
//
// The side record is advice, never safety: the lease alone keeps runs apart
// (G2). The record only decides whether a run that finds the lease busy
// waits (the holder is an earlier attempt of the same tick) or skips. It is
// written just after the lease is taken and left to expire after release, so
// for a moment it can name the previous holder; the worst outcome is that a
// retry waits for a run it could have skipped, or skips a tick whose earlier
// attempt is still running it.

// ErrReplaced ends a run of a replace-policy job, running or still waiting
// for the job's lease, when a newer tick of the job asks for the job. Such a
// run is recorded as replaced and not retried (the asynq handler returns it
// wrapped with asynq.SkipRetry).
var ErrReplaced = errors.New("jobs: replaced by a newer tick")

var (
	// errShutdown is the cause that ends runs when the worker stops.
	errShutdown = errors.New("jobs: worker shutting down")
	// errRunTimeout is the cause that ends a run after its job's timeout.
	errRunTimeout = errors.New("jobs: run timed out")
)

// Runner runs one execution of a job; *Executor is the one baton uses, and
// a program may wrap it (to time runs, say). ctx ends when the run must stop
// (lease lost, timeout, replaced, shutdown); v is the run's execution lease,
// nil for concurrency: allow.
type Runner interface {
	Execute(ctx context.Context, job *config.Job, run Run, v Validity) (Result, error)
}

// Stats counts a worker's runs since it was made.
type Stats struct {
	// Ran counts runs that finished successfully.
	Ran uint64
	// Failed counts runs that ended with an error, or could not start (an
	// unknown job, a bad task, a lock error): the ones asynq retries or
	// archives.
	Failed uint64
	// Skipped counts ticks not run because another run held the job
	// (forbid), or a newer tick held it (replace), or it was a duplicate
	// local dispatch of a running tick.
	Skipped uint64
	// Replaced counts runs stopped, or waits given up, because a newer tick
	// of their replace-policy job asked for the job.
	Replaced uint64
	// Dropped counts ticks of a buffering job (buffer_one, buffer_all) not
	// run because the job was running and its buffer was full.
	Dropped uint64
}

type counters struct {
	ran, failed, skipped, replaced, dropped atomic.Uint64
}

// holderRecord is the value of the side record NS:{exec:<job>}:holder.
type holderRecord struct {
	V       int    `json:"v"`    // format version, formats.HolderRecord (absent: 1)
	ID      string `json:"id"`   // tick ID, job@RFC3339
	Tick    string `json:"tick"` // RFC 3339, UTC
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
}

// cancelRequest is a message on NS:cancel:<job>.
type cancelRequest struct {
	V       int    `json:"v"`    // format version, formats.CancelRequest (absent: 1)
	ID      string `json:"id"`   // the requester's tick ID
	Tick    string `json:"tick"` // the requester's tick, RFC 3339, UTC
	Replica string `json:"replica"`
}

// activeRun is a run in progress on this worker (waiting for its lease or
// executing): what a replace request or the shutdown needs to stop it.
type activeRun struct {
	at     time.Time
	local  bool
	cancel context.CancelCauseFunc
}

// engine applies the concurrency policies and runs executions. It serves the
// asynq handler and local runs alike; only the asynq path has retries.
type engine struct {
	cfg     *config.Config
	locks   *locking.Client
	rdb     redis.UniversalClient // queue Redis: side records, cancel channel
	exec    Runner
	replica string
	log     *slog.Logger
	clock   clock.Clock // backoffs, heartbeats and waits
	onRun   func(RunObservation)
	stats   counters
	byJob   sync.Map // job name -> *counters, jobs of cfg only
	// job + reason -> true: a refused replace request was logged
	badCancel sync.Map

	mu      sync.Mutex
	active  map[string]map[*activeRun]struct{} // by job name
	closing bool
	wg      sync.WaitGroup // runs in flight, asynq and local
}

// InternalLockName reports whether name is one baton uses for its own
// leases (execution leases, allow jobs' fences, singleton and leader
// elections): `baton lock`
// refuses it, so a user's lock cannot take a job's lease by accident.
func InternalLockName(name string) bool {
	return strings.HasPrefix(name, "exec:") || strings.HasPrefix(name, "fence:") || strings.HasPrefix(name, "singleton:") ||
		name == ClusterLeaderElection || strings.HasPrefix(name, ClusterLeaderElection+":")
}

// ClusterLeaderElection is the election of the replica that runs leader:
// true jobs.
const ClusterLeaderElection = "cluster-leader"

// LockName is the name of the lock job's runs hold, as locking.Client.Held
// lists it: its execution lease ("exec:JOB") for forbid and replace jobs,
// its election's lock for a singleton, "" for an allow job (its runs hold
// none).
func LockName(job *config.Job) string {
	switch {
	case job.Mode == config.ModeSingleton:
		return "election:" + singletonElection(job.Name)
	case job.Concurrency == config.ConcurrencyAllow:
		return ""
	}
	return execLockName(job.Name)
}

// execLockName is the lock name of job's execution lease.
func execLockName(job string) string { return "exec:" + job }

// fenceLockName is the lock an allow job's runs take their fences from.
func fenceLockName(job string) string { return "fence:" + job }

// hist is the run history the engine writes to (the queue Redis).
func (e *engine) hist() *history { return &history{cfg: e.cfg, rdb: e.rdb, log: e.log} }

// notStarted records in the history that tick t's attempt did not start.
func (e *engine) notStarted(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, st Status, reason string) {
	run := Run{Job: job.Name, Tick: t.At, RunID: t.RunID, Attempt: attempt, Replica: e.replica}
	e.hist().finished(ctx, t, run, st, job, Result{ExitCode: -1}, reason, "")
	e.observe(RunObservation{Job: job.Name, Status: st})
}

// observe reports a run to the run observer, if any.
func (e *engine) observe(o RunObservation) {
	if e.onRun != nil {
		e.onRun(o)
	}
}

func (e *engine) holderKey(job string) string {
	return e.cfg.Namespace + ":{exec:" + job + "}:holder"
}

// signer signs and checks replace requests.
func (e *engine) signer() *signer {
	if e.cfg == nil {
		return nil
	}
	return newSigner(e.cfg.Security)
}

func (e *engine) cancelChannel(job string) string {
	return e.cfg.Namespace + ":cancel:" + job
}

// Stats returns the run counters, summed over the jobs.
func (e *engine) Stats() Stats { return e.stats.snapshot() }

// JobStats returns the run counters of each job of the config, by name.
// Tasks of jobs not in the config count in Stats only.
func (e *engine) JobStats() map[string]Stats {
	out := make(map[string]Stats, len(e.cfg.Jobs))
	for i := range e.cfg.Jobs {
		name := e.cfg.Jobs[i].Name
		if c := e.jobCounters(name); c != nil {
			out[name] = c.snapshot()
		} else {
			out[name] = Stats{}
		}
	}
	return out
}

func (c *counters) snapshot() Stats {
	return Stats{Ran: c.ran.Load(), Failed: c.failed.Load(), Skipped: c.skipped.Load(), Replaced: c.replaced.Load(), Dropped: c.dropped.Load()}
}

// count counts with f on the totals and, for a job of the config, on the
// job's counters.
func (e *engine) count(job string, f func(*counters)) {
	f(&e.stats)
	if _, ok := e.cfg.Job(job); !ok {
		return // bounded by the job list: a task's name is not a label
	}
	if c := e.jobCounters(job); c != nil {
		f(c)
		return
	}
	c, _ := e.byJob.LoadOrStore(job, &counters{})
	f(c.(*counters))
}

func (e *engine) jobCounters(job string) *counters {
	if c, ok := e.byJob.Load(job); ok {
		return c.(*counters)
	}
	return nil
}

func (e *engine) register(job string, ar *activeRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil {
		e.active = map[string]map[*activeRun]struct{}{}
	}
	if e.active[job] == nil {
		e.active[job] = map[*activeRun]struct{}{}
	}
	e.active[job][ar] = struct{}{}
}

func (e *engine) unregister(job string, ar *activeRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.active[job], ar)
	if len(e.active[job]) == 0 {
		delete(e.active, job)
	}
}

// cancelRuns cancels every active run that match reports true for, with
// cause, and returns how many.
func (e *engine) cancelRuns(cause error, match func(job string, ar *activeRun) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for job, runs := range e.active {
		for ar := range runs {
			if match(job, ar) {
				ar.cancel(cause)
				n++
			}
		}
	}
	return n
}

// onCancelRequest handles a replace request: every run of the job on this
// worker whose tick is older than the requester's is cancelled with
// ErrReplaced. A run of the same or a newer tick is left alone, so an older
// tick never replaces a newer one.
func (e *engine) onCancelRequest(job string, payload string) {
	body, err := []byte(payload), error(nil)
	if g := e.signer(); g.enabled() {
		body, err = g.verify(domainCancel+"\x00"+e.cancelChannel(job), body)
	}
	if err != nil {
		if _, logged := e.badCancel.LoadOrStore(job+"\x00"+err.Error(), true); !logged {
			e.log.Error("ignoring a replace request (logged once per job and reason)", slog.String("job", job), slog.Any("error", err))
		}
		return
	}
	var req cancelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	at, err := time.Parse(time.RFC3339, req.Tick)
	if err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	n := e.cancelRuns(ErrReplaced, func(j string, ar *activeRun) bool { return j == job && ar.at.Before(at) })
	if n > 0 {
		e.log.Info("replacing older runs", slog.String("job", job), slog.String("by", req.ID),
			slog.String("by_replica", req.Replica), slog.Int("runs", n))
	}
}

// runTick runs tick t of job under the job's concurrency policy and returns
// what the asynq handler returns:
//
//   - nil: the run succeeded, or the tick was skipped (forbid, or a newer
//     tick holds a replace job). A skip is a success on purpose: an error
//     would be retried, and RevokeTask would delete the task and with it the
//     tick's ID, letting a late dispatch enqueue the tick again.
//   - an error wrapping ErrReplaced and asynq.SkipRetry: a newer tick replaced
//     the run; it is archived, not retried.
//   - any other error: the run failed (handler error, timeout, execution
//     lease lost mid-run, lock masters unreachable); asynq retries it per the
//     job's max_retry, and the retry takes the lease anew.
//
// retries says that the caller retries failures (asynq): then a run that
// finds the lease held by an earlier attempt of the same tick waits for it.
// Without retries (local runs) the same tick's holder can only be a duplicate
// dispatch, which is skipped.
func (e *engine) runTick(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ar := &activeRun{at: t.At, local: !retries, cancel: cancel}
	e.register(job.Name, ar)
	defer e.unregister(job.Name, ar)

	run := Run{
		Job:     job.Name,
		Tick:    t.At.UTC(),
		RunID:   t.RunID,
		Attempt: attempt,
		Fence:   t.Fence,
		Replica: e.replica,
	}
	if job.Handler != nil {
		run.Payload = job.Handler.Payload
	}
	base := e.log.With(
		slog.String("job", job.Name),
		slog.String("tick", run.Tick.Format(time.RFC3339)),
		slog.String("run_id", run.RunID),
		slog.String("replica", e.replica),
		slog.Int("attempt", attempt),
	)
	if t.Manual {
		base = base.With(slog.Bool("manual", true))
	}
	// Until the run holds its lease (or, allow, its fence), "fence" is the
	// dispatch fence of a local run, 0 for a queued one (a payload's fence
	// is never used).
	log := base.With(slog.Int64("fence", t.Fence))

	if job.Concurrency == config.ConcurrencyAllow {
		if retries {
			// a queued run's tick came through Redis: its fence comes
			// from the lock masters, like every run's (a local run's
			// came from them through the claim, in this process)
			f, err := e.allowFence(ctx, job, log)
			if err != nil {
				e.notStarted(ctx, job, t, attempt, StatusFailed, err.Error())
				return err
			}
			run.Fence = f
			log = base.With(slog.Int64("fence", f))
		}
		return e.execute(ctx, job, t, run, nil, log)
	}
	lease, err := e.acquire(ctx, job, t, attempt, retries, log)
	if lease == nil {
		return err
	}
	run.Fence = lease.Fence()
	log = base.With(slog.Int64("fence", run.Fence))
	return e.execute(ctx, job, t, run, lease, log)
}

// fenceLockTTL is the ttl of the momentary lease an allow run takes for its
// fence.
const fenceLockTTL = 2 * time.Second

// allowFence returns a fencing token for a run of an allow job, which runs
// without the execution lease: the fence of a momentary lease on
// "fence:JOB", taken (waiting for a concurrent run's) and released at once.
// The lock masters issue it, so fences grow in the order runs start and no
// payload decides one.
func (e *engine) allowFence(ctx context.Context, job *config.Job, log *slog.Logger) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, max(job.LockTTL, 10*time.Second))
	defer cancel()
	// masters out of reach for a moment (a blip, a failover) are waited
	// for, as a run of a lease-holding job waits for its lease
	lease, err := e.locks.Lock(lctx, fenceLockName(job.Name), fenceLockTTL)
	for backoff := 100 * time.Millisecond; err != nil && lctx.Err() == nil; backoff = min(2*backoff, time.Second) {
		t := e.clock.NewTimer(backoff)
		select {
		case <-lctx.Done():
		case <-t.C():
			lease, err = e.locks.Lock(lctx, fenceLockName(job.Name), fenceLockTTL)
		}
		t.Stop()
	}
	if err != nil {
		e.count(job.Name, func(c *counters) { c.failed.Add(1) })
		log.Error("cannot take a fencing token from the lock masters", slog.Any("error", err))
		return 0, fmt.Errorf("jobs: job %q: fencing token: %w", job.Name, err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), fenceLockTTL)
	_ = lease.Release(rctx) // it expires within fenceLockTTL anyway
	rcancel()
	return lease.Fence(), nil
}

// acquire takes job's execution lease for tick t, applying the policy when
// it is busy. It returns the lease, or nil and the handler's result: nil for
// a skip, an error otherwise.
func (e *engine) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*locking.Lease, error) {
	name := execLockName(job.Name)
	lease, err := e.locks.TryLock(ctx, name, job.LockTTL)
	if err == nil {
		if !job.Concurrency.Buffers() || e.first(ctx, job, t, lease, log) {
			return e.held(ctx, job, t, attempt, lease, log), nil
		}
		// older ticks are kept: first released the lease and kept this
		// tick behind them (or found the buffer full), and it waits
		var done bool
		lease, done, err = e.keep(ctx, job, t, attempt, slog.String("holder", "none (the lease goes to an older kept tick)"), log)
		if done {
			return nil, err
		}
		return e.obtained(ctx, job, t, attempt, lease, err, log)
	}
	if done, res := e.notObtained(ctx, job, t, attempt, err, log); done {
		return nil, res
	}
	h, ok := e.readHolder(ctx, job.Name, log)
	holder := slog.String("holder", h.String())
	sameTick := ok && h.ID == t.ID()
	switch {
	case sameTick && retries:
		log.Info("waiting for an earlier attempt of this tick", holder)
		lease, err = e.locks.Lock(ctx, name, job.LockTTL)
	case job.Concurrency == config.ConcurrencyForbid || sameTick:
		e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
		log.Info("skipped: another run holds the job", holder)
		e.notStarted(ctx, job, t, attempt, StatusSkipped, "another run holds the job: "+h.String())
		return nil, nil
	case job.Concurrency.Buffers():
		var done bool
		lease, done, err = e.keep(ctx, job, t, attempt, holder, log)
		if done {
			return nil, err // dropped (nil), or the buffer could not be written
		}
	case ok && h.after(t.At):
		e.skipForNewer(ctx, job, t, attempt, h, log)
		return nil, nil
	default:
		log.Info("replacing the running run", holder)
		var newer *newerHolder
		if lease, err = e.replace(ctx, job, t, log); errors.As(err, &newer) {
			e.skipForNewer(ctx, job, t, attempt, newer.h, log)
			return nil, nil
		}
	}
	return e.obtained(ctx, job, t, attempt, lease, err, log)
}

// skipForNewer records tick t skipped because h, a newer tick's run, holds
// the job (concurrency replace): an older tick never runs after a newer one.
func (e *engine) skipForNewer(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, h holderRecord, log *slog.Logger) {
	e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
	log.Info("skipped: a newer tick holds the job", slog.String("holder", h.String()))
	e.notStarted(ctx, job, t, attempt, StatusSkipped, "a newer tick holds the job: "+h.String())
}

// newerHolder ends replace's wait: the holder record, written just after
// the lease was taken and so possibly missing when the waiter first read
// it, shows a newer tick's run.
type newerHolder struct{ h holderRecord }

func (n *newerHolder) Error() string { return "jobs: a newer tick holds the job: " + n.h.String() }

// obtained ends acquire after a wait for the lease: the lease, recorded as
// held, or the handler's result for err.
func (e *engine) obtained(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, lease *locking.Lease, err error, log *slog.Logger) (*locking.Lease, error) {
	if err != nil {
		if done, res := e.notObtained(ctx, job, t, attempt, err, log); done {
			return nil, res
		}
		// Unreachable: Lock only gives up when ctx ends or masters fail.
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		return nil, fmt.Errorf("jobs: %s: execution lease: %w", t.ID(), err)
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
			e.notStarted(ctx, job, t, attempt, StatusReplaced, "replaced by a newer tick while waiting for the job")
			return true, fmt.Errorf("jobs: %s: %w: %w", t.ID(), ErrReplaced, asynq.SkipRetry)
		}
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		log.Warn("gave up waiting for the job", slog.Any("error", cause))
		e.notStarted(ctx, job, t, attempt, StatusFailed, "gave up waiting for the execution lease: "+cause.Error())
		return true, fmt.Errorf("jobs: %s: waiting for the execution lease: %w", t.ID(), errors.Join(err, cause))
	}
	var oe *locking.ObtainError
	if errors.As(err, &oe) && oe.Held() {
		return false, nil
	}
	e.count(t.Job, func(c *counters) { c.failed.Add(1) })
	log.Error("cannot take the execution lease", slog.Any("error", err))
	e.notStarted(ctx, job, t, attempt, StatusFailed, "cannot take the execution lease: "+err.Error())
	return true, fmt.Errorf("jobs: %s: execution lease: %w", t.ID(), err)
}

// replace asks every worker to stop the job's runs of older ticks, then waits
// for the lease. The request is repeated every lock_ttl/3 while waiting,
// because pub/sub delivers at most once (a worker reconnecting misses it).
func (e *engine) replace(ctx context.Context, job *config.Job, t scheduler.Tick, log *slog.Logger) (*locking.Lease, error) {
	msg, _ := json.Marshal(cancelRequest{V: formats.CancelRequest, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano), Replica: e.replica})
	ch := e.cancelChannel(job.Name)
	msg = e.signer().sign(domainCancel+"\x00"+ch, msg)
	publish := func() {
		if err := e.rdb.Publish(ctx, ch, msg).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot publish the replace request", slog.Any("error", err))
		}
	}
	publish()
	// the wait ends when the holder record shows a newer tick (read again
	// at each publish): the run that holds the lease may have taken it
	// after this tick read no record, and an older tick must not wait to
	// run after it
	lockCtx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	waitCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		every(waitCtx.Done(), e.clock, job.LockTTL/3, func() {
			if h, ok := e.readHolder(waitCtx, job.Name, log); ok && h.after(t.At) {
				giveUp(&newerHolder{h})
				return
			}
			publish()
		})
	})
	lease, err := e.locks.Lock(lockCtx, execLockName(job.Name), job.LockTTL)
	stop()
	wg.Wait()
	var newer *newerHolder
	if err != nil && ctx.Err() == nil && errors.As(context.Cause(lockCtx), &newer) {
		return nil, newer
	}
	return lease, err
}

// held records the new holder and keeps the record alive with the lease.
func (e *engine) held(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, lease *locking.Lease, log *slog.Logger) *locking.Lease {
	rec, _ := json.Marshal(holderRecord{V: formats.HolderRecord, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano), RunID: t.RunID, Attempt: attempt, Replica: e.replica})
	key := e.holderKey(job.Name)
	set := func(ctx context.Context) {
		if err := e.rdb.Set(ctx, key, rec, job.LockTTL).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot write the holder record", slog.Any("error", err))
		}
	}
	set(ctx)
	e.wg.Go(func() {
		every(lease.Done(), e.clock, job.LockTTL/3, func() { set(lease.Context()) })
	})
	return lease
}

// readHolder reads the job's holder record; ok is false if there is none or
// it cannot be read.
func (e *engine) readHolder(ctx context.Context, job string, log *slog.Logger) (h holderRecord, ok bool) {
	v, err := e.rdb.Get(ctx, e.holderKey(job)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			log.Warn("cannot read the holder record", slog.Any("error", err))
		}
		return h, false
	}
	if err := json.Unmarshal(v, &h); err != nil {
		log.Warn("bad holder record", slog.Any("error", err))
		return h, false
	}
	return h, true
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

// execute runs the execution: under the lease's context and with the lease as
// Validity when there is one, bounded by the job's timeout. It releases the
// lease (token-checked) before returning.
func (e *engine) execute(ctx context.Context, job *config.Job, t scheduler.Tick, run Run, lease *locking.Lease, log *slog.Logger) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var validity Validity
	if lease != nil {
		validity = lease
		stop := context.AfterFunc(lease.Context(), func() { cancel(context.Cause(lease.Context())) })
		defer func() {
			stop()
			ctx, done := context.WithTimeout(context.WithoutCancel(ctx), job.LockTTL)
			defer done()
			if job.Concurrency.Buffers() && lease.Context().Err() == nil {
				// only while this run holds the lease: once it is lost,
				// another run may hold it, and the mark would be false
				e.handOff(ctx, job, t, log)
			}
			if err := lease.Release(ctx); err != nil && !errors.Is(err, locking.ErrNotHeld) {
				log.Warn("cannot release the execution lease (it expires at its ttl)", slog.Any("error", err))
			}
		}()
	}
	execCtx := runCtx
	if job.Timeout > 0 {
		var done context.CancelFunc
		execCtx, done = context.WithTimeoutCause(runCtx, job.Timeout, errRunTimeout)
		defer done()
	}

	log.Info("run started")
	hist := e.hist()
	hist.started(ctx, t, run)
	start := time.Now()
	res, err := e.exec.Execute(execCtx, job, run, validity)
	took := slog.Duration("took", time.Since(start))
	obs := RunObservation{Job: job.Name, StartLag: start.Sub(t.At), Took: time.Since(start)}
	defer func() { e.observe(obs) }()
	switch {
	case job.Exec != nil:
		log = log.With(slog.Int("exit_code", res.ExitCode))
	case job.HTTP != nil:
		log = log.With(slog.Int("status", res.Status))
	}

	cause := context.Cause(runCtx)
	switch {
	case runCtx.Err() != nil && errors.Is(cause, ErrReplaced):
		e.count(t.Job, func(c *counters) { c.replaced.Add(1) })
		log.Info("replaced by a newer tick", took)
		hist.finished(ctx, t, run, StatusReplaced, job, res, "stopped for a newer tick", "")
		obs.Status = StatusReplaced
		return fmt.Errorf("jobs: %s: %w: %w", t.ID(), ErrReplaced, asynq.SkipRetry)
	case err == nil:
		e.count(t.Job, func(c *counters) { c.ran.Add(1) })
		log.Info("run succeeded", took)
		hist.finished(ctx, t, run, StatusOK, job, res, "", "")
		obs.Status = StatusOK
		return nil
	}
	e.count(t.Job, func(c *counters) { c.failed.Add(1) })
	st := StatusFailed
	switch {
	case lease != nil && runCtx.Err() != nil && errors.Is(cause, locking.ErrLost):
		st = StatusLeaseLost
		err = errors.Join(err, fmt.Errorf("jobs: %s: execution lease lost mid-run: %w", t.ID(), cause))
	case runCtx.Err() != nil:
		err = errors.Join(err, fmt.Errorf("jobs: %s: stopped: %w", t.ID(), cause))
	case errors.Is(context.Cause(execCtx), errRunTimeout):
		st = StatusTimedOut
		err = errors.Join(err, fmt.Errorf("jobs: %s: %w after %s", t.ID(), errRunTimeout, job.Timeout))
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrPermission):
		// a command that cannot start fails the same way on every attempt
		err = fmt.Errorf("jobs: %s: command cannot start (not retried): %w: %w", t.ID(), err, asynq.SkipRetry)
	default:
		err = &tickError{tick: t, err: err}
	}
	tail := outputTail(res.Output, job)
	if tail != "" {
		log = log.With(slog.String("output_tail", tail))
	}
	log.Warn("run failed", took, slog.Any("error", err))
	hist.finished(ctx, t, run, st, job, res, err.Error(), tail)
	obs.Status = st
	return err
}

// tickError is a run's error as the worker returns it (asynq keeps it as
// the task's last error): the tick, then what went wrong, saying the job's
// name and the package once.
type tickError struct {
	tick scheduler.Tick
	err  error
}

func (e *tickError) Error() string {
	return "jobs: " + e.tick.ID() + ": " + cleanReason(e.tick, e.err.Error())
}

func (e *tickError) Unwrap() error { return e.err }

// Bounds of the output tail a failed run's log line carries.
const (
	tailLines = 10
	tailBytes = 2 << 10
)

// outputTail is the end of a run's captured output for its failure line: at
// most tailLines lines and tailBytes bytes, with the job's own env and
// header values (where its secrets come from) and the config's ${VAR}
// values masked, longest first and before the cut (so a secret the cut
// would fall into is masked whole).
func outputTail(out []byte, job *config.Job) string {
	var values []string
	if job.Exec != nil {
		for _, v := range job.Exec.Env {
			values = append(values, v)
		}
	}
	if job.HTTP != nil {
		for _, v := range job.HTTP.Headers {
			values = append(values, v)
		}
	}
	values = append(values, job.SecretValues()...)
	// the whole capture (at most the executor's output limit) is masked
	// first: a cut made before could fall inside a secret
	s := redact.Of(values...).Text(strings.TrimRight(string(out), "\n"))
	// a capture cut at its limit can end inside a secret (an http job keeps
	// the body's start): a secret's first bytes at the very end go too
	s = maskCutSecret(s, values)
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	if lines := strings.Split(s, "\n"); len(lines) > tailLines {
		s = strings.Join(lines[len(lines)-tailLines:], "\n")
	}
	return strings.ToValidUTF8(s, "?")
}

// maskCutSecret masks the end of s when it is the beginning of one of the
// values (4 bytes or more of it, as redact masks whole values of 4 bytes
// or more).
func maskCutSecret(s string, values []string) string {
	cut := 0
	for _, v := range values {
		for k := len(v) - 1; k >= 4 && k > cut; k-- {
			if strings.HasSuffix(s, v[:k]) {
				cut = k
				break
			}
		}
	}
	if cut == 0 {
		return s
	}
	return s[:len(s)-cut] + redact.Mask
}

// every calls f every d on c until done is closed.
func every(done <-chan struct{}, c clock.Clock, d time.Duration, f func()) {
	t := c.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			f()
			t.Reset(d)
		}
	}
}
