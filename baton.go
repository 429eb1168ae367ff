// Package baton assembles baton replicas: the composition root that the
// baton command and Go programs share. A replica reads a config (package
// config), claims and dispatches ticks (package scheduler) under locks
// (package locking) and runs jobs on asynq workers, Go handlers included.
//
//	cfg, err := config.LoadFile("baton.yaml")
//	...
//	reg := jobs.NewRegistry()
//	err = reg.HandleFunc("report", func(ctx context.Context, run jobs.Run) error {
//	...
//	redis.SetLogger(baton.RedisLogger(slog.Default()))
//	r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithLogger(slog.Default()))
//	...
//	if err := r.Run(ctx); err != nil { // until SIGTERM, then a graceful shutdown
//
// (ExampleNew, whole.) The package imports neither net/http nor
// Prometheus: package batonhttp serves /healthz, /readyz, /metrics, the API
// and the dashboard for the replicas of a process (batonhttp.NewHandler),
// to mount on the program's own server at http.listen; a replica whose
// config sets http.listen warns when nothing serves it. Replica.Stats reads
// what /metrics serves, for a program that exports metrics another way.
//
// A program whose config has exec jobs runs them under a supervisor, which
// is the program's own binary in a hidden mode: call MaybeRunSupervisor
// first thing in main.
//
// # Exported names
//
// A replica: [New] makes a [Replica] of a config, with the [Option] values
// [WithHandlers], [WithLogger], [WithRole] (a [Role]), [WithReplicaID],
// [WithVersion], [WithSchedulerClock], [WithSupervisorPath],
// [WithTracerProvider], [WithDispatchObserver], [WithHTTPServed] and
// [WithLockMessageFilter]. [MissingHandlers] names the handler jobs a
// registry lacks, [MaybeRunSupervisor] runs an exec job's supervisor,
// [RedisLogger] wires go-redis's log ([WithTracerProvider] takes a tracer
// provider, which package otlpenv builds from the OTEL_* variables).
// [Replica.Stats] reads [ReplicaStats]: [SchedulerStats], [WorkerStats],
// [MasterStats], [ScheduleStats], [JobMeasures], [RunMeasures] and
// [Histogram].
//
// A deployment: [Init] marks a brand-new set of lock masters; [InitLayout]
// records the namespace's layout ([LayoutReport]; [ErrLayoutMismatch],
// [ErrSchedulesMoving]). [NewCluster] makes a [Cluster], which reads and
// acts on a deployment from outside its replicas: its [Status]
// ([JobStatus], [ReplicaStatus], [SchedulesStatus], [ScheduleProblem],
// [StoreWentBack], the limits' [LimitStatus] and [SlotStatus]); the tick ledger ([TickLedger], [LedgerTick], [Outcome];
// [DefaultLedgerTicks], [DefaultLedgerSpan], [MaxLedgerTicks],
// [MaxLedgerTicksAll]; [ErrTickWindow]); pause, resume and skip
// ([PauseNote], [MaxPauseNote], [PauseResult], [ResumeResult],
// [CatchUpResult], [SkippedTick], [SkipRequest], [SkipResult], [MaxSkip];
// [ErrBadPause]); trigger and backfill ([BackfillPlan],
// [MaxBackfill], a chain's backfill waiting at most [MaxChainAwait],
// [AnyDispatched];
// [ErrUnknownJob], [ErrNotTriggerable], [ErrBackfillWindow]).
//
// Runtime schedules: a [Schedule] is put from a [ScheduleSpec] (or a
// document), with the [PutOption] [AheadOfDeploy], and listed a
// [SchedulePage] at a time by a [ScheduleQuery]; [CheckETag] checks the
// condition of a change. Their errors: [ErrNoSchedule],
// [ErrScheduleChanged], [ErrNoRunner], [ErrBadQuery]. The calendars they
// name may be put at runtime too: a [Calendar] is put from a
// [CalendarSpec] and listed a [CalendarPage] at a time; their errors:
// [ErrNoCalendar], [ErrCalendarInUse].
package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/lifecycle"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/internal/singleton"
	"github.com/batonhq/baton/internal/supervisor"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// MaybeRunSupervisor turns this process into an exec job's supervisor and
// exits, if it was started as one; otherwise it returns at once. A program
// that runs exec jobs calls it first thing in main (the baton command
// does): replicas start their supervisors from os.Executable().
func MaybeRunSupervisor() { supervisor.MaybeRun() }

// Role says which parts a replica runs.
type Role int

// The roles.
const (
	// RoleAll runs the scheduler and the worker (baton run).
	RoleAll Role = iota
	// RoleScheduler claims and dispatches ticks, and runs local-mode jobs
	// (baton scheduler).
	RoleScheduler
	// RoleWorker runs queued jobs and singletons (baton worker).
	RoleWorker
)

// String returns "run", "scheduler" or "worker", as the roster shows it.
func (r Role) String() string {
	switch r {
	case RoleScheduler:
		return "scheduler"
	case RoleWorker:
		return "worker"
	}
	return "run"
}

// Option configures New.
type Option func(*options)

type options struct {
	id         string
	role       Role
	log        *slog.Logger
	handlers   *jobs.Registry
	version    string
	supervisor string
	dropLock   func(string) bool
	clock      scheduler.Clock
	tracer     trace.TracerProvider
	onDispatch func(job string, lag time.Duration)
	httpServed bool
}

// WithReplicaID names the replica (default host-pid): in logs, metrics,
// the roster and lock holder records.
func WithReplicaID(id string) Option { return func(o *options) { o.id = id } }

// unservedHTTPGrace is how long after Run a replica whose config sets
// http.listen waits for a handler to serve it before it warns.
var unservedHTTPGrace = 5 * time.Second

// warnUnservedHTTP warns, once, when the config sets http.listen and
// nothing serves the replica's HTTP handler unservedHTTPGrace after Run
// began: a Go program serves it itself (batonhttp.NewHandler), baton run
// does.
func (r *Replica) warnUnservedHTTP(ctx context.Context) {
	if r.cfg.HTTP.Listen == "" || r.httpServed.Load() {
		return
	}
	t := time.NewTimer(unservedHTTPGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if !r.httpServed.Load() {
		r.log.Warn("http.listen is set, but nothing serves this replica's HTTP API, metrics and dashboard: a Go program mounts batonhttp.NewHandler(replica) on its own server at that address (baton run serves it itself); or remove http.listen",
			"listen", r.cfg.HTTP.Listen, "replica", r.id)
	}
}

// WithHTTPServed tells the replica that the program serves its HTTP
// handler on http.listen (baton run does; batonhttp.NewHandler tells the
// replicas it serves: SetHTTPServed): without either, a replica whose config sets
// http.listen warns that nothing serves it.
func WithHTTPServed() Option { return func(o *options) { o.httpServed = true } }

// SetHTTPServed tells the replica that a handler serves its HTTP API on
// http.listen, as WithHTTPServed does at New: batonhttp.NewHandler calls
// it for the replicas it serves, so that none warns that nothing does.
func (r *Replica) SetHTTPServed() { r.httpServed.Store(true) }

// WithRole sets what the replica runs (default RoleAll).
func WithRole(r Role) Option { return func(o *options) { o.role = r } }

// WithLogger sets the logger of every part. Default (and nil): none, but
// for one warning per lock master found in its restart quarantine (which,
// why, until when) and one at start when the config file sets
// locking.fresh_deployment, written to stderr. go-redis's own messages go
// to its process-wide logger, which baton leaves alone: pass
// RedisLogger(l) to redis.SetLogger to have them in l too.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithHandlers registers the Go handlers that handler jobs name.
func WithHandlers(r *jobs.Registry) Option { return func(o *options) { o.handlers = r } }

// WithVersion is the version the replica publishes in the roster (default
// "dev").
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithSupervisorPath is the binary exec jobs run under as supervisor
// (default os.Executable(); it must call MaybeRunSupervisor).
func WithSupervisorPath(path string) Option { return func(o *options) { o.supervisor = path } }

// WithSchedulerClock sets the clock the scheduler reads and waits on to
// fire ticks (default: the real clock). Package batontest drives a fake one
// through it; the worker, the lock client and Redis keep their own clocks.
func WithSchedulerClock(c scheduler.Clock) Option { return func(o *options) { o.clock = c } }

// WithTracerProvider traces every tick the replica claims, dispatches and
// runs with tp (otlpenv.FromEnv builds one from the OTEL_* variables; see the operating guide's Traces
// section): one trace per tick, from the claim that won it through its
// dispatch to each attempt of its run, on whichever replicas they happen.
// Default (and nil): no tracing, at no cost. baton does not read OTel's
// global provider: pass otel.GetTracerProvider() to use it.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// WithDispatchObserver calls f after each tick the replica dispatched, with
// the job and the dispatch's lag: from the tick's due instant to the
// dispatch's return, by the scheduler's clock (the due instant is the
// return's time less lag). f must not block. Default: none (the lag is in
// the metrics as baton_dispatch_lag_seconds).
func WithDispatchObserver(f func(job string, lag time.Duration)) Option {
	return func(o *options) { o.onDispatch = f }
}

// WithLockMessageFilter leaves out the lock client's messages that drop
// matches (baton dev: an embedded server has no CONFIG command).
func WithLockMessageFilter(drop func(msg string) bool) Option {
	return func(o *options) { o.dropLock = drop }
}

// Replica is one baton replica wired from a config: its Redis clients, lock
// client, scheduler (none in RoleWorker), dispatcher and worker. It owns
// everything it built. Start it, then Run it; or Run it, which starts it.
type Replica struct {
	id         string
	role       Role
	version    string
	metrics    *replicaMetrics
	listHash   string               // its job list's, as the roster names it
	mu         sync.Mutex           // guards noClaims and stopClaims
	noClaims   bool                 // StopClaiming was called
	stopClaims func()               // stops the claims, while Run runs them
	httpServed atomic.Bool          // a handler serves it (WithHTTPServed, SetHTTPServed)
	claimsDone chan struct{}        // closed when the scheduler (and leadership) stopped in Run
	lockStats  func() locking.Stats // its lock client's (which Close clears)
	cfg        *config.Config
	log        *slog.Logger
	queue      redis.UniversalClient   // the queue Redis: readiness pings
	mast       []redis.UniversalClient // lock masters (queue itself when none are configured)
	own        []redis.UniversalClient // clients to close
	locks      *locking.Client
	lockGroup  *quorum.Group // the masters' state for Waiting; kept after Close
	client     *asynq.Client // enqueues cron ticks; nil in RoleWorker
	sched      *scheduler.Scheduler
	worker     *worker.Worker
	singles    *singleton.Jobs      // singleton jobs; nil in RoleScheduler or without any
	leader     *leadership          // cluster leader election; nil unless a job sets leader: true
	follower   *schedstore.Follower // the runtime schedules: cfg's source, put into sched as they change
	running    *lifecycle.Group     // the parts Start started (see parts); nil before and after
}

// New builds, without connecting, a replica of cfg. It fails on a config
// it cannot wire (a bad Redis URL, a lock master listed twice), and with a
// *config.Error naming each job and its line when the replica would
// run a handler job whose handler WithHandlers does not register (see
// MissingHandlers).
func New(cfg *config.Config, opts ...Option) (*Replica, error) {
	o := options{version: "dev"}
	for _, opt := range opts {
		opt(&o)
	}
	if err := MissingHandlers(cfg, o.role, o.handlers); err != nil {
		return nil, err
	}
	if o.id == "" {
		host, _ := os.Hostname()
		o.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var lockLog *slog.Logger
	if o.log == nil {
		// no logger: nothing is logged but the lock masters' quarantine
		// warnings (once per master and quarantine), on stderr: a first
		// minute that dispatches nothing must not be silent
		o.log = slog.New(slog.DiscardHandler)
		lockLog = slog.New(quarantineOnly{slog.NewTextHandler(os.Stderr, nil)})
	} else {
		lockLog = o.log.With("component", "locking")
	}
	if o.version == "" {
		o.version = "dev"
	}
	log := o.log
	r := &Replica{id: o.id, role: o.role, cfg: cfg, log: log, version: o.version, metrics: newReplicaMetrics(cfg), claimsDone: make(chan struct{})}
	r.httpServed.Store(o.httpServed)
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	queue, queueOpt, err := wiring.QueueRedis(cfg)
	if err != nil {
		return nil, err
	}
	r.queue = queue
	r.own = append(r.own, queue)
	masters, err := wiring.DialMasters(cfg)
	if err != nil {
		return nil, err
	}
	r.own = append(r.own, masters...)
	r.mast = masters
	if len(masters) == 0 {
		r.mast = []redis.UniversalClient{queue}
	}
	// the runtime schedules: every lookup of a job by name finds them
	// beside the job list, and the scheduler gets them as they change;
	// the marks of what replicas saw of them live on the lock masters
	r.follower = schedstore.NewFollower(schedstore.Of(queue, cfg), cfg,
		r.applySchedules, schedstore.WithLogger(log.With("component", "schedules")), schedstore.WithFetch(),
		schedstore.WithWentBack(r.scheduleStoreWentBack), schedstore.WithMarks(schedstore.NewMasterMarks(r.mast, cfg.Namespace)),
		schedstore.WithRefusals(r.refuseSchedules))
	cfg = cfg.WithSource(r.follower)
	r.cfg = cfg
	r.locks, err = locking.NewQuorum(r.mast, append(wiring.LockOptions(cfg),
		locking.WithLogger(wiring.Dropping(lockLog, o.dropLock)))...)
	if err != nil {
		return nil, err
	}
	if cfg.Locking.FreshDeploymentInFile() {
		lockLog.Warn(freshDeploymentWarning)
	}
	r.lockStats = r.locks.Stats
	r.lockGroup = quorum.Of(r.locks)
	r.listHash = roster.ListHash(cfg)

	sup := o.supervisor
	if sup == "" {
		if sup, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("baton: cannot find this program's executable (exec jobs run under it as supervisor): %w", err)
		}
	}
	cgroups := cfg.Worker.ExecCgroup
	if cgroups == config.ExecCgroupAuto {
		cgroups = "" // the executor's default: below baton's own cgroup
	}
	exec := executor.New(executor.WithLogger(log), executor.WithSupervisorPath(sup), executor.WithHandlers(o.handlers),
		executor.WithCgroups(cgroups))
	wopts := []worker.Option{worker.WithLogger(log), worker.WithReplica(o.id), worker.WithReplicaInfo(o.version, o.role.String()),
		worker.WithRunObserver(r.metrics.ran), worker.WithPollIntervals(cfg.Worker.PollInterval, 0), worker.WithLockMasters(r.mast),
		worker.WithTracerProvider(o.tracer), worker.WithHandlers(o.handlers)}
	if o.role == RoleScheduler {
		wopts = append(wopts, worker.WithLocalOnly())
	}
	if len(masters) == 0 {
		wopts = append(wopts, worker.WithQueueAsLockMaster())
	}
	r.worker = worker.New(cfg, queueOpt, r.locks, exec, wopts...)
	if o.role != RoleScheduler {
		for _, j := range cfg.Jobs {
			if j.Mode == config.ModeSingleton {
				r.singles = singleton.New(cfg, r.locks, exec, singleton.WithLogger(log), singleton.WithReplica(o.id))
				break
			}
		}
	}

	if o.role != RoleWorker {
		r.client = asynq.NewClient(queueOpt)
		disp := loggingDispatcher{handoff.New(cfg, r.client, r.worker, handoff.WithLogger(log),
			handoff.WithQueueRedis(queue), handoff.WithMovingJobs(r.worker.RoutedDifferently)), log}
		var sj []scheduler.Job
		for _, j := range cfg.Jobs {
			if j.Mode == config.ModeSingleton {
				continue // no ticks: the workers campaign for it
			}
			if j.Leader && r.leader == nil {
				e, err := r.locks.Election(locknames.ClusterLeader, 2*cfg.Scheduler.TickLeaseTTL)
				if err != nil {
					return nil, err
				}
				r.leader = &leadership{e: e, id: o.id, log: log}
			}
			sj = append(sj, schedulerJob(&j))
		}
		sopts := append(schedulerOptions(cfg, o.id),
			scheduler.WithLeader(r.leader.leading),
			scheduler.WithDispatchObserver(r.dispatchObserver(o.onDispatch)),
			scheduler.WithTracerProvider(o.tracer),
			scheduler.WithLogger(log))
		if o.clock != nil {
			sopts = append(sopts, scheduler.WithClock(o.clock))
		}
		r.sched, err = scheduler.New(r.locks, sj, disp, sopts...)
		if err != nil {
			return nil, err
		}
	}
	ok = true
	return r, nil
}

// MissingHandlers returns a *config.Error naming every handler job
// of cfg that a replica of role runs and whose handler reg does not
// register (reg may be nil), or nil. A scheduler runs local-mode jobs, a
// worker cron and singleton jobs, RoleAll all of them: a RoleScheduler
// replica may lack the handlers of queued jobs, a RoleWorker replica those
// of local jobs.
func MissingHandlers(cfg *config.Config, role Role, reg *jobs.Registry) error {
	var errs []config.FieldError
	for i := range cfg.Jobs {
		j := &cfg.Jobs[i]
		if j.Handler == nil || !role.runs(j.Mode) {
			continue
		}
		if reg != nil {
			if _, ok := reg.Lookup(j.Handler.Name); ok {
				continue
			}
		}
		file := cfg.File
		if file == "" {
			file = "<input>"
		}
		errs = append(errs, config.FieldError{File: file, Line: j.Line, Job: j.Name, Field: "handler.name",
			Msg: fmt.Sprintf("Go handler %q is not registered (baton.WithHandlers): only a Go program that registers it can run this job", j.Handler.Name)})
	}
	if errs == nil {
		return nil
	}
	return &config.Error{Errors: errs}
}

// runs reports whether a replica of role runs the jobs of mode.
func (r Role) runs(m config.Mode) bool {
	if m == config.ModeLocal {
		return r != RoleWorker
	}
	return r != RoleScheduler
}

// schedulerJob is the scheduler's view of a config job: the one conversion
// from a config job to a scheduler.Job.
func schedulerJob(j *config.Job) scheduler.Job {
	return scheduler.Job{
		Name:             j.Name,
		Schedule:         j.Sched,
		StartingDeadline: j.StartingDeadline,
		Catchup:          scheduler.Catchup(j.Catchup),
		CatchupMax:       j.CatchupMax,
		Jitter:           j.Jitter,
		Paused:           j.Paused,
		LeaderOnly:       j.Leader,
		// a local run starts in-process: nothing but the tick's record
		// keeps another replica from running it again
		CommitFirst: j.Mode == config.ModeLocal,
	}
}

// schedulerOptions are the options of cfg's schedulers (a replica's, a
// backfill's): the claims of both must agree on keys, leases and records.
func schedulerOptions(cfg *config.Config, replica string) []scheduler.Option {
	return []scheduler.Option{
		scheduler.WithNamespace(cfg.Namespace),
		scheduler.WithReplica(replica),
		scheduler.WithTickLeaseTTL(cfg.Scheduler.TickLeaseTTL),
		scheduler.WithFollowerDelay(config.FollowerDelay), // the config's starting deadlines leave room for it
		scheduler.WithMaxClockSkew(cfg.MaxClockSkew),
		// tick records live exactly as long as the tasks' Retention
		scheduler.WithRecordMargin(cfg.Scheduler.RetentionMargin),
	}
}

// dispatchObserver observes a dispatch in the metrics and, if set, in f.
func (r *Replica) dispatchObserver(f func(job string, lag time.Duration)) func(string, time.Duration) {
	if f == nil {
		return r.metrics.dispatched
	}
	return func(job string, lag time.Duration) {
		r.metrics.dispatched(job, lag)
		f(job, lag)
	}
}

// ID is the replica's id.
func (r *Replica) ID() string { return r.id }

// Role is what the replica runs.
func (r *Replica) Role() Role { return r.role }

// Config is the config the replica was made from; it must not be changed.
func (r *Replica) Config() *config.Config { return r.cfg }

// Leading reports whether this replica leads the cluster now: it claims
// the ticks of the jobs with leader: true. False when no job has it. The
// election's record in Redis names the leader a moment before the leader
// itself acts on it; this is the leader's own view.
func (r *Replica) Leading() bool { return r.leader.leading() }

// Start connects: it checks that the queue Redis answers and is laid out
// for this release, and starts the replica's parts (see parts): the
// runtime schedules' follower, the worker, the singleton jobs and two
// reporters. Run calls it if it was not called; Close stops what it
// started.
func (r *Replica) Start(ctx context.Context) error {
	if r.running != nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.queue.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("baton: replica %s: queue Redis %s does not answer: %w", r.id, wiring.DescribeRedis(r.cfg), err)
	}
	if err := layout.Check(pctx, r.queue, r.cfg); err != nil {
		return fmt.Errorf("baton: replica %s: %w", r.id, err)
	}
	// when the deployment's first replica started: the tick ledger does not
	// call a tick before it missed (best effort: a ledger without it calls
	// them as before)
	if err := r.queue.SetNX(pctx, deployedKey(r.cfg.Namespace), time.Now().UnixMilli(), 0).Err(); err != nil {
		r.log.Warn("cannot record the deployment's first start", "err", err)
	}
	running := lifecycle.NewGroup(r.parts()...)
	if err := running.Start(ctx); err != nil {
		return fmt.Errorf("baton: replica %s: %w", r.id, err)
	}
	r.running = running
	return nil
}

// parts are the replica's long-running parts, in the order Start starts
// them; Run stops them in reverse once its claims stopped:
//
//  1. the runtime schedules' follower: it reads them all before the others
//     start, so that the worker and the scheduler's catch-up know them,
//     then follows their changes;
//  2. the worker (asynq's server, the roster heartbeat, the replace
//     requests' subscription), stopped with worker.shutdown_grace for its
//     running jobs;
//  3. the singleton jobs, stopped (SIGTERM, then SIGKILL) and resigned so
//     that a standby takes over at once;
//  4. the reports of refused runtime schedule definitions, and the
//     warning about http jobs of a config no replica serves over HTTP.
func (r *Replica) parts() []lifecycle.Part {
	follow := lifecycle.NewLoop(func(ctx context.Context) error { r.follower.Run(ctx); return nil })
	parts := []lifecycle.Part{
		{Name: "runtime schedules follower", Service: lifecycle.Funcs(func(ctx context.Context) error {
			if err := r.follower.Sync(ctx); err != nil {
				r.log.Warn("cannot read the runtime schedules at start; retrying in the background", "err", err)
			}
			return follow.Start(ctx)
		}, follow.Stop)},
		{Name: "worker", Service: lifecycle.Funcs(func(context.Context) error { return r.worker.Start() }, r.worker.Shutdown)},
	}
	if r.singles != nil {
		parts = append(parts, lifecycle.Part{Name: "singleton jobs", Service: lifecycle.Funcs(func(context.Context) error { return r.singles.Start() }, r.singles.Shutdown)})
	}
	return append(parts,
		lifecycle.Part{Name: "refused definitions report", Service: lifecycle.NewLoop(func(ctx context.Context) error { r.reportRefusals(ctx); return nil })},
		lifecycle.Part{Name: "unserved http warning", Service: lifecycle.NewLoop(func(ctx context.Context) error { r.warnUnservedHTTP(ctx); return nil })},
	)
}

// claims are the parts that claim ticks, started by Run after the others
// and stopped first, together, at Run's end or at StopClaiming: the
// cluster leadership campaign (when a job has leader: true), then the
// scheduler, which claims the leader jobs' ticks under it. sched is the
// scheduler's loop (nil without a scheduler): its end ends Run's claiming.
func (r *Replica) claims() (claims *lifecycle.Group, sched *lifecycle.Loop) {
	var parts []lifecycle.Part
	if r.leader != nil {
		parts = append(parts, lifecycle.Part{Name: "cluster leadership", Service: lifecycle.NewLoop(func(ctx context.Context) error { r.leader.campaign(ctx); return nil })})
	}
	if r.sched != nil {
		sched = lifecycle.NewLoop(r.sched.Run)
		parts = append(parts, lifecycle.Part{Name: "scheduler", Service: sched})
	}
	return lifecycle.NewGroup(parts...), sched
}

// Run starts the replica if needed and runs it until ctx ends, then shuts
// it down:
//
//  1. ctx ending stops the claims: the scheduler stops claiming ticks, lets
//     claims in flight commit or release their tick leases, and the
//     leadership resigns.
//  2. The other parts stop in reverse of their start (see parts): the
//     reporters; the singleton jobs (SIGTERM, then SIGKILL, and resign, so
//     a standby replica takes over at once, not after the lease ttl); the
//     worker: asynq stops fetching, running jobs get
//     worker.shutdown_grace to finish, then are cancelled (their tasks go
//     back to the queue, exec children are killed), and every run releases
//     its execution lease; the follower. The scheduler stops first because
//     it hands local ticks to this worker.
//  3. Close: the asynq client, the lock client (no lease is left to
//     extend) and the Redis connections.
//
// It returns the scheduler's error, or the parts' stop errors. A replica
// runs once.
func (r *Replica) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		r.Close()
		return err
	}
	r.log.Info("replica started", "replica", r.id, "role", r.role.String())
	err := r.claim(ctx)
	r.log.Info("replica stopping: no new ticks; waiting for running jobs", "replica", r.id, "grace", r.cfg.Worker.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), r.cfg.Worker.ShutdownGrace+10*time.Second)
	defer cancel()
	if serr := r.running.Stop(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("baton: replica %s: %w", r.id, serr))
	}
	r.Close()
	r.log.Info("replica stopped", "replica", r.id)
	return err
}

// claim runs the claims until ctx ends, then stops them. When they stop
// before (StopClaiming, or the scheduler returned), it returns the
// scheduler's error at once if it failed, else waits for ctx: the worker
// goes on running what was dispatched.
func (r *Replica) claim(ctx context.Context) error {
	claims, sched := r.claims()
	started, err := r.startClaims(ctx, claims)
	if started {
		var ended <-chan struct{} // the scheduler returned by itself
		if sched != nil {
			ended = sched.Done()
		}
		select {
		case <-ctx.Done():
		case <-ended:
			err = sched.Err()
		}
		err = errors.Join(err, stopWithin(claims, r.claimsStopBound()))
	}
	close(r.claimsDone)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if r.sched != nil {
		r.log.Info("replica no longer claims ticks; its worker runs on", "replica", r.id)
	}
	<-ctx.Done()
	return nil
}

// startClaims starts claims unless StopClaiming came first, and lets
// StopClaiming stop them from now on.
func (r *Replica) startClaims(ctx context.Context, claims *lifecycle.Group) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.noClaims {
		return false, nil
	}
	if err := claims.Start(ctx); err != nil {
		return false, fmt.Errorf("baton: replica %s: %w", r.id, err)
	}
	r.stopClaims = func() { go func() { _ = stopWithin(claims, r.claimsStopBound()) }() }
	return true, nil
}

// claimsStopBound is how long stopping the claims may take: the
// scheduler's claims in flight commit or release their tick leases, and a
// local tick's commit is bounded by the lease's ttl only, so up to twice
// scheduler.tick_lease_ttl, and a minute on top. The worker stops after:
// it runs the local ticks committed until then.
func (r *Replica) claimsStopBound() time.Duration {
	return 2*r.cfg.Scheduler.TickLeaseTTL + time.Minute
}

// stopWithin stops s, waiting for it d at most.
func stopWithin(s lifecycle.Service, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Stop(ctx)
}

// StopClaiming makes a running replica's scheduler stop claiming ticks
// (claims in flight commit or release) while its worker goes on running
// queued tasks until Run's context ends. A config reload uses it to hand
// claiming to the replica of the new config at once while the old one's
// worker still runs the ticks it dispatched (the new one's may not know
// their jobs). Called before Run, it makes Run start without claiming; on
// a replica without a scheduler it does nothing.
func (r *Replica) StopClaiming() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noClaims = true
	if r.stopClaims != nil {
		r.stopClaims()
		r.stopClaims = nil
	}
}

// Retirable tells whether a replica that stopped claiming (StopClaiming)
// has nothing left that a replica of next, running beside it on the same
// Redis, cannot do: it returns why not, or "" when it may stop now. Its
// scheduler's claims in flight must be over, and no queue its worker
// consumes may hold a task that a worker of next would hand back to it
// (roster.Drained). Its own running jobs do not count: stopping lets them finish within
// worker.shutdown_grace. A
// config reload stops the replaced replica once it is retirable, at the
// latest after its drain time.
func (r *Replica) Retirable(ctx context.Context, next *config.Config) (string, error) {
	if r.sched != nil {
		select {
		case <-r.claimsDone:
		default:
			return "claims in flight", nil
		}
	}
	if r.role == RoleScheduler {
		return "", nil // no worker: nothing it runs
	}
	return roster.Drained(ctx, r.queue, r.cfg, next)
}

// Close releases what the replica holds without running it: a started
// replica's worker is shut down first. Run closes the replica itself; Close
// is for a replica that will not run (another part of the program failed
// to start). It is safe on a half-built or closed replica.
func (r *Replica) Close() {
	if r.running != nil {
		_ = stopWithin(r.running, 10*time.Second)
		r.running = nil
	}
	if r.client != nil {
		_ = r.client.Close()
		r.client = nil
	}
	if r.locks != nil {
		_ = r.locks.Close()
		r.locks = nil
	}
	wiring.CloseAll(r.own)
	r.own = nil
}

// Ready reports why the replica is not ready, or "" when it is: the queue
// Redis and a majority of lock masters answer PING, and the scheduler's
// clock is within the skew bound. The reason names no address.
func (r *Replica) Ready(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.queue.Ping(ctx).Err(); err != nil {
		return fmt.Sprintf("replica %s: queue Redis does not answer PING: %s", r.id, wiring.ErrClass(err))
	}
	if len(r.cfg.Locking.Masters) > 0 {
		up := 0
		var last error
		for _, m := range r.mast {
			if err := m.Ping(ctx).Err(); err != nil {
				last = err
				continue
			}
			up++
		}
		if need := len(r.mast)/2 + 1; up < need {
			return fmt.Sprintf("replica %s: %d of %d lock masters answer PING, %d needed: %s", r.id, up, len(r.mast), need, wiring.ErrClass(last))
		}
	}
	if r.sched != nil && r.sched.Skewed() {
		return fmt.Sprintf("replica %s: clock off Redis TIME beyond max_clock_skew %v: not claiming ticks", r.id, r.cfg.MaxClockSkew)
	}
	return ""
}

// Waiting is what the replica waits for while it is ready: one line per
// lock master it last found in its restart quarantine, with why and until
// when by the master's clock; "" when none. It contacts no server (the
// masters' state as the lock client last saw it), and names no address,
// as /readyz answers without a token.
func (r *Replica) Waiting() string {
	g := r.lockGroup
	if g == nil {
		return ""
	}
	var lines []string
	for _, m := range g.Known() {
		if m.State != quorum.StateQuarantine {
			continue
		}
		lines = append(lines, fmt.Sprintf("replica %s: lock master %d in its restart quarantine until %s by its clock (in %v): %s",
			r.id, m.Idx, m.Until.UTC().Format(time.RFC3339), time.Until(m.UntilLocal).Round(time.Second), m.Why))
	}
	return strings.Join(lines, "\n")
}

// loggingDispatcher logs every tick it dispatched, naming the replica that
// did: with the run lines of the worker, the log shows who dispatched and who
// ran each tick.
type loggingDispatcher struct {
	d   scheduler.Dispatcher
	log *slog.Logger
}

// Dispatch dispatches t and logs it.
func (l loggingDispatcher) Dispatch(ctx context.Context, t scheduler.Tick) error {
	err := l.d.Dispatch(ctx, t)
	if errors.Is(err, scheduler.ErrAlreadyDispatched) {
		l.log.Info("tick already enqueued by an earlier dispatch", "job", t.Job, "tick", t.At.UTC().Format(time.RFC3339),
			"replica", t.Replica, "detail", err.Error())
		return err
	}
	if err != nil {
		return err
	}
	l.log.Info("tick dispatched", "job", t.Job, "tick", t.At.UTC().Format(time.RFC3339),
		"run_id", t.RunID, "fence", t.Fence, "replica", t.Replica)
	return nil
}

// Precheck forwards to the dispatcher's Precheck (scheduler.Prechecker).
func (l loggingDispatcher) Precheck(ctx context.Context, t scheduler.Tick) error {
	if p, ok := l.d.(scheduler.Prechecker); ok {
		return p.Precheck(ctx, t)
	}
	return nil
}

// NotDispatched passes the scheduler's record of a tick that did not run to
// the dispatcher, if it keeps records.
func (l loggingDispatcher) NotDispatched(ctx context.Context, t scheduler.Tick, paused bool, reason string) {
	if r, ok := l.d.(scheduler.Recorder); ok {
		r.NotDispatched(ctx, t, paused, reason)
	}
}

// leadership campaigns for the cluster leader role, which pins leader: true
// jobs to one replica so a Go program can keep in-memory state between runs.
type leadership struct {
	e    *locking.Election
	id   string
	log  *slog.Logger
	term atomic.Pointer[locking.Term]
}

// leading reports whether this replica leads now. Safe on a nil leadership.
func (l *leadership) leading() bool {
	if l == nil {
		return false
	}
	t := l.term.Load()
	return t != nil && t.Err() == nil
}

// campaign campaigns until ctx ends, leading while it can; on ctx's end
// it resigns, which wakes the next candidate.
func (l *leadership) campaign(ctx context.Context) {
	for ctx.Err() == nil {
		term, err := l.e.Campaign(ctx, l.id)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("cluster leader campaign failed; retrying", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		l.term.Store(term)
		l.log.Info("leading the cluster: running leader jobs", "replica", l.id, "fence", term.Fence())
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = term.Resign(rctx)
			cancel()
		case <-term.Done():
			l.log.Warn("cluster leadership lost", "replica", l.id, "err", term.Err())
		}
		l.term.Store(nil)
	}
}

// freshDeploymentWarning is logged at every start of a replica whose config
// file sets locking.fresh_deployment.
const freshDeploymentWarning = "locking.fresh_deployment is on: lock masters that carry no marker vote at once, so if every master restarts empty at once (a compose restart, a power loss) locks still held by live clients are granted again and ticks may run twice; restart safety is given up for as long as it stays on. Remove it: a brand-new set of masters is marked once with `baton init` instead"

// quarantineOnly passes on the lock masters' restart quarantine warnings
// (see quorum.QuarantineWarning) and freshDeploymentWarning alone: what a
// replica without a logger writes to stderr.
type quarantineOnly struct{ h slog.Handler }

func (q quarantineOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && q.h.Enabled(ctx, l)
}

func (q quarantineOnly) Handle(ctx context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "in its restart quarantine until") && r.Message != freshDeploymentWarning {
		return nil
	}
	return q.h.Handle(ctx, r)
}

func (q quarantineOnly) WithAttrs(as []slog.Attr) slog.Handler {
	return quarantineOnly{q.h.WithAttrs(as)}
}

func (q quarantineOnly) WithGroup(name string) slog.Handler {
	return quarantineOnly{q.h.WithGroup(name)}
}
