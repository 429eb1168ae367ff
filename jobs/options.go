package jobs

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/scheduler"
)

// Option configures the package's long-lived objects: NewExecutor,
// NewWorker, NewSingletons and NewDispatcher. Each reads the options that
// concern it (its doc comment lists them) and ignores the others, so one
// list can be handed to all of them.
type Option func(*options)

type options struct {
	log          *slog.Logger
	replica      string
	version      string
	role         string
	clock        clock.Clock
	handlers     *Registry
	supervisor   string
	outputLimit  int
	httpClient   *http.Client
	taskCheck    time.Duration
	delayedCheck time.Duration
	localOnly    bool
	moving       func(job string) bool
	queueRedis   redis.UniversalClient
	lockMasters  []redis.UniversalClient
	onRun        func(RunObservation)
}

func newOptions(opts []Option) options {
	o := options{
		log:          slog.New(slog.DiscardHandler),
		clock:        clock.Real(),
		outputLimit:  DefaultOutputLimit,
		taskCheck:    100 * time.Millisecond,
		delayedCheck: time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.replica == "" {
		host, _ := os.Hostname()
		o.replica = fmt.Sprintf("%s-%d", host, os.Getpid())
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

// WithLogger sets the logger (of a worker: also of its runs and of asynq).
// Default: no logging. All.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithReplica sets the replica id that runs and campaigns carry
// (Run.Replica, BATON_REPLICA, the leader id, log lines). Default:
// "<hostname>-<pid>". Worker, Singletons.
func WithReplica(id string) Option { return func(o *options) { o.replica = id } }

// WithReplicaInfo sets what a worker publishes about its replica in the
// roster besides its id and job list: the baton version and the replica's
// role ("run", "worker" or "scheduler"). Defaults: "dev", and "worker"
// ("scheduler" with WithLocalOnly). Worker.
func WithReplicaInfo(version, role string) Option {
	return func(o *options) { o.version, o.role = version, role }
}

// WithClock sets the clock that backoffs, heartbeats and retries wait on
// (scheduler.RealClock by default; tests move a simulated one). Worker,
// Singletons.
func WithClock(c scheduler.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// RunObservation is one run (or tick that did not start) as WithRunObserver
// reports it.
type RunObservation struct {
	Job    string
	Status Status // ok, failed, skipped, replaced, dropped, timed out, lease lost
	// StartLag is from the tick's due instant to the run's start; 0 for a
	// tick that did not start.
	StartLag time.Duration
	// Took is how long the run ran; 0 for a tick that did not start.
	Took time.Duration
}

// WithRunObserver calls f when a run ends or a tick does not start
// (metrics). f must not block. Worker.
func WithRunObserver(f func(RunObservation)) Option { return func(o *options) { o.onRun = f } }

// WithHandlers sets the registry handler jobs are looked up in. Default
// none: every handler job fails with ErrUnknownHandler. Executor.
func WithHandlers(r *Registry) Option { return func(o *options) { o.handlers = r } }

// WithSupervisorPath sets the executable exec jobs' supervisors run as: a
// binary whose main calls baton.MaybeRunSupervisor first thing. Default "",
// the running binary (os.Executable()). Executor.
func WithSupervisorPath(path string) Option { return func(o *options) { o.supervisor = path } }

// WithOutputLimit sets how many bytes of output a Result keeps (see
// Result.Output). Default DefaultOutputLimit (64 KiB); n <= 0 keeps none.
// Executor.
func WithOutputLimit(n int) Option { return func(o *options) { o.outputLimit = max(n, 0) } }

// WithHTTPClient sets the client of http jobs. Default a client with
// http.DefaultTransport and no timeout of its own (ctx and Job.Timeout bound
// each request). Executor.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithPollIntervals sets how often an idle worker asks asynq's queues for new
// tasks (default 100ms, against asynq's 1s: it bounds the start lag of a run)
// and how often due retries are moved back to their queue (default 1s: a
// retry starts up to that much after its backoff). Zero keeps a default.
// Worker.
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
// not work the queues. Worker.
func WithLocalOnly() Option { return func(o *options) { o.localOnly = true } }

// WithMovingJobs tells a dispatcher which jobs live replicas route
// differently (another mode or queue: a rolling deploy in progress; see
// Worker.RoutedDifferently). Their ticks are bound to a queue even when
// asynq knows only one, so a replica that runs the job locally and one that
// enqueues it agree. Dispatcher.
func WithMovingJobs(moving func(job string) bool) Option {
	return func(o *options) { o.moving = moving }
}

// WithQueueRedis gives a dispatcher a client of the queue Redis (the one
// the asynq client enqueues into), so it can keep a tick's exactly-once
// across queues: asynq refuses a task ID twice only within one queue, and
// replicas with different job lists (a rolling deploy that moves a job to
// another queue, or from cron to local mode) could otherwise enqueue one
// tick into two queues, or run it locally after it was enqueued. Dispatcher.
func WithQueueRedis(rdb redis.UniversalClient) Option {
	return func(o *options) { o.queueRedis = rdb }
}

// WithLockMasters gives a worker clients of the lock masters, from which it
// reads a job's pause flag before it runs a scheduled task: a task of a job
// whose flag a majority of them hold is refused, as the claim would refuse
// its tick. Without them only the config's paused counts. Worker.
func WithLockMasters(masters []redis.UniversalClient) Option {
	return func(o *options) { o.lockMasters = masters }
}
