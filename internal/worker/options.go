package worker

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/runid"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// Option configures a Worker (New).
type Option func(*options)

type options struct {
	log           *slog.Logger
	replica       string
	version       string
	role          string
	clock         clock.Clock
	taskCheck     time.Duration
	delayedCheck  time.Duration
	localOnly     bool
	lockMasters   []redis.UniversalClient
	queueIsMaster bool
	onRun         func(RunObservation)
	tracer        trace.Tracer
	handlers      *jobs.Registry
}

func newOptions(opts []Option) options {
	o := options{
		log:          slog.New(slog.DiscardHandler),
		clock:        clock.Real(),
		taskCheck:    100 * time.Millisecond,
		delayedCheck: time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.replica == "" {
		o.replica = runid.Replica()
	}
	if o.version == "" {
		o.version = "dev"
	}
	if o.role == "" {
		o.role = "worker"
		if o.localOnly {
			o.role = "scheduler"
		}
	}
	return o
}

// WithLogger sets the logger of the worker, its runs and asynq. Default: no
// logging.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithReplica sets the replica id that runs carry (jobs.Run.Replica,
// BATON_REPLICA, log lines) and the roster publishes. Default
// runid.Replica().
func WithReplica(id string) Option { return func(o *options) { o.replica = id } }

// WithReplicaInfo sets what a worker publishes about its replica in the
// roster besides its id and job list: the baton version and the replica's
// role ("run", "worker" or "scheduler"). Defaults: "dev", and "worker"
// ("scheduler" with WithLocalOnly).
func WithReplicaInfo(version, role string) Option {
	return func(o *options) { o.version, o.role = version, role }
}

// WithClock sets the clock that heartbeats and refreshes wait on
// (scheduler.RealClock by default; tests move a simulated one).
func WithClock(c scheduler.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithTracerProvider traces each attempt of a run with tp's tracer: a
// "baton.run" span, the child of the dispatch span whose trace context the
// task (or, for a local run, RunLocal's ctx) carries, and the run's log
// lines carry its trace_id. Default (and nil): no tracing, at no cost.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tracing.Tracer(tp) }
}

// RunObservation is one run (or tick that did not start) as WithRunObserver
// reports it.
type RunObservation struct {
	Job    string
	Status jobs.Status // ok, failed, skipped, replaced, dropped, timed out, lease lost
	// StartLag is from the tick's due instant to the run's start; 0 for a
	// tick that did not start.
	StartLag time.Duration
	// Took is how long the run ran; 0 for a tick that did not start.
	Took time.Duration
}

// WithRunObserver calls f when a run ends or a tick does not start
// (metrics). f must not block.
func WithRunObserver(f func(RunObservation)) Option { return func(o *options) { o.onRun = f } }

// WithPollIntervals sets how often an idle worker asks asynq's queues for new
// tasks (default 100ms, against asynq's 1s: it bounds the start lag of a run)
// and how often due retries are moved back to their queue (default 1s: a
// retry starts up to that much after its backoff). Zero keeps a default.
func WithPollIntervals(tasks, retries time.Duration) Option {
	return func(o *options) {
		if tasks > 0 {
			o.taskCheck = tasks
		}
		if retries > 0 {
			o.delayedCheck = retries
		}
	}
}

// WithLocalOnly makes a worker that fetches nothing from asynq and only runs
// local-mode jobs handed to RunLocal: for a replica that schedules but does
// not work the queues.
func WithLocalOnly() Option { return func(o *options) { o.localOnly = true } }

// WithLockMasters gives a worker clients of the lock masters, from which it
// reads a job's pause flag before it runs a scheduled task: a task of a job
// whose flag a majority of them hold is refused, as the claim would refuse
// its tick. Without them only the config's paused counts.
func WithLockMasters(masters []redis.UniversalClient) Option {
	return func(o *options) { o.lockMasters = masters }
}

// WithQueueAsLockMaster says that the queue Redis is the only lock master
// (no lock masters configured apart): the worker reads a job's pause flag
// from it in the round trip that reads the tick's ledger record.
func WithQueueAsLockMaster() Option {
	return func(o *options) { o.queueIsMaster = true }
}

// WithHandlers gives a worker the registry of Go handlers its executor
// runs (the one given to executor.WithHandlers): a runtime schedule's
// handler job runs only on a worker whose registry has its handler, and the
// roster publishes the names so that a worker without it hands its tasks
// to one with it. Default none: such tasks are handed back or archived.
func WithHandlers(r *jobs.Registry) Option { return func(o *options) { o.handlers = r } }
