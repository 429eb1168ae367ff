package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the engine, what the runs of a worker share: the config,
// the clients, the runs in progress (to stop them) and the history writes.
// runTick (execute.go) is its run path; the policies (policy.go) decide how
// runs of one job meet.

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
	exec    executor.Runner
	replica string
	log     *slog.Logger
	clock   clock.Clock // backoffs, heartbeats and waits
	onRun   func(RunObservation)
	stats   counters
	// job name -> its concurrency policy, chosen once (choosePolicies)
	policies map[string]policy
	byJob    sync.Map // job name -> *counters, jobs of cfg only
	// job + reason -> true: a refused replace request was logged
	badCancel sync.Map

	mu      sync.Mutex
	active  map[string]map[*activeRun]struct{} // by job name
	closing bool
	wg      sync.WaitGroup // runs in flight, asynq and local
}

// notStarted records in the history that tick t's attempt did not start.
func (e *engine) notStarted(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, st jobs.Status, reason string) {
	run := jobs.Run{Job: job.Name, Tick: t.At, RunID: t.RunID, Attempt: attempt, Replica: e.replica}
	e.hist().finished(ctx, t, run, st, job, jobs.Result{ExitCode: -1}, reason, "")
	e.observe(RunObservation{Job: job.Name, Status: st})
}

// observe reports a run to the run observer, if any.
func (e *engine) observe(o RunObservation) {
	if e.onRun != nil {
		e.onRun(o)
	}
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

// errShutdown is the cause that ends runs when the worker stops.
var errShutdown = errors.New("jobs: worker shutting down")
