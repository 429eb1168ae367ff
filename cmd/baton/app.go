package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// role says which parts a replica runs.
type role int

const (
	roleRun       role = iota // scheduler and worker (baton run, baton dev)
	roleScheduler             // scheduler, and a local-only worker for local jobs
	roleWorker                // worker only
)

func (r role) String() string {
	switch r {
	case roleScheduler:
		return "scheduler"
	case roleWorker:
		return "worker"
	}
	return "run"
}

// replica is one baton replica wired from a config: its Redis clients, lock
// client, scheduler (nil in the worker role), dispatcher and worker. It
// owns everything it built.
type replica struct {
	id      string
	role    role
	cfg     *jobs.Config
	log     *slog.Logger
	queue   redis.UniversalClient   // the queue Redis: readiness pings
	mast    []redis.UniversalClient // lock masters (queue itself when none are configured)
	own     []redis.UniversalClient // clients to close
	locks   *locking.Client
	client  *asynq.Client // enqueues cron ticks; nil in the worker role
	sched   *scheduler.Scheduler
	worker  *jobs.Worker
	singles *jobs.Singletons // singleton jobs; nil in the scheduler role or without any
	leader  *leadership      // cluster leader election; nil unless a job sets leader: true
}

// newReplica builds (without connecting) the replica id of cfg in role r.
// dropLockMsg, if not nil, filters the lock client's messages.
func newReplica(cfg *jobs.Config, id string, r role, log *slog.Logger, dropLockMsg func(string) bool) (*replica, error) {
	rp := &replica{id: id, role: r, cfg: cfg, log: log}
	ok := false
	defer func() {
		if !ok {
			rp.close()
		}
	}()
	queue, queueOpt, err := queueRedis(cfg)
	if err != nil {
		return nil, err
	}
	rp.queue = queue
	rp.own = append(rp.own, queue)
	masters, err := dialMasters(cfg)
	if err != nil {
		return nil, err
	}
	rp.own = append(rp.own, masters...)
	rp.mast = masters
	if len(masters) == 0 {
		rp.mast = []redis.UniversalClient{queue}
	}
	rp.locks, err = locking.New(rp.mast,
		locking.WithPrefix(cfg.Namespace+":lock:"),
		locking.WithLateness(cfg.Locking.Lateness),
		locking.WithRestartQuarantine(cfg.Locking.RestartQuarantine),
		freshOpt(cfg),
		locking.WithLogger(printfLogger{log.With("component", "locking"), dropLockMsg}))
	if err != nil {
		return nil, err
	}

	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find baton's own executable (exec jobs run under it as supervisor): %w", err)
	}
	executor := jobs.NewExecutor(jobs.WithSupervisorPath(exe), jobs.WithExecutorLogger(log))
	wopts := []jobs.WorkerOption{jobs.WithReplica(id), jobs.WithLogger(log), jobs.WithReplicaInfo(shortVersion(), r.String())}
	if r == roleScheduler {
		wopts = append(wopts, jobs.WithLocalOnly())
	}
	rp.worker = jobs.NewWorker(cfg, queueOpt, rp.locks, executor, wopts...)
	if r != roleScheduler {
		for _, j := range cfg.Jobs {
			if j.Mode == jobs.ModeSingleton {
				rp.singles = jobs.NewSingletons(cfg, rp.locks, executor,
					jobs.WithSingletonReplica(id), jobs.WithSingletonLogger(log))
				break
			}
		}
	}

	if r != roleWorker {
		rp.client = asynq.NewClient(queueOpt)
		disp := loggingDispatcher{jobs.NewDispatcher(cfg, rp.client, rp.worker, log, jobs.WithQueueRedis(queue),
			jobs.WithMovingJobs(rp.worker.RoutedDifferently)), log}
		var sj []scheduler.Job
		for _, j := range cfg.Jobs {
			switch j.Mode {
			case jobs.ModeSingleton:
				continue // no ticks: the workers campaign for it
			}
			if j.Leader && rp.leader == nil {
				e, err := rp.locks.Election(jobs.ClusterLeaderElection, 2*cfg.Scheduler.TickLeaseTTL)
				if err != nil {
					return nil, err
				}
				rp.leader = &leadership{e: e, id: id, log: log}
			}
			sj = append(sj, scheduler.Job{
				Name:             j.Name,
				Schedule:         j.Sched,
				StartingDeadline: j.StartingDeadline,
				Catchup:          string(j.Catchup),
				CatchupMax:       j.CatchupMax,
				Jitter:           j.Jitter,
				Paused:           j.Paused,
				LeaderOnly:       j.Leader,
				// a local run starts in-process: nothing but the tick's
				// record keeps another replica from running it again
				CommitFirst: j.Mode == jobs.ModeLocal,
			})
		}
		rp.sched, err = scheduler.New(rp.locks, sj, disp,
			scheduler.WithLeader(rp.leader.leading),
			scheduler.WithNamespace(cfg.Namespace),
			scheduler.WithReplica(id),
			scheduler.WithTickLeaseTTL(cfg.Scheduler.TickLeaseTTL),
			scheduler.WithFollowerDelay(jobs.FollowerDelay), // the config's starting deadlines leave room for it
			scheduler.WithMaxClockSkew(cfg.MaxClockSkew),
			// tick records live exactly as long as the tasks' Retention
			scheduler.WithRecordMargin(cfg.Scheduler.RetentionMargin),
			scheduler.WithLogger(log))
		if err != nil {
			return nil, err
		}
	}
	ok = true
	return rp, nil
}

// queueRedis returns a go-redis client and the asynq connection option for
// the queue Redis of cfg: a URL (rediss:// is TLS), Sentinel or Cluster.
func queueRedis(cfg *jobs.Config) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	rc := cfg.Redis
	tlsConfig := func(on bool) *tls.Config {
		if !on {
			return nil
		}
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch {
	case rc.Sentinel != nil:
		s := rc.Sentinel
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: s.Master, SentinelAddrs: s.Addrs, Username: s.Username, Password: s.Password,
			DB: s.DB, TLSConfig: tlsConfig(s.TLS), ContextTimeoutEnabled: true,
		})
		return c, asynq.RedisFailoverClientOpt{
			MasterName: s.Master, SentinelAddrs: s.Addrs, Username: s.Username, Password: s.Password,
			DB: s.DB, TLSConfig: tlsConfig(s.TLS),
		}, nil
	case rc.Cluster != nil:
		cl := rc.Cluster
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cl.Addrs, Username: cl.Username, Password: cl.Password,
			TLSConfig: tlsConfig(cl.TLS), ContextTimeoutEnabled: true,
		})
		return c, asynq.RedisClusterClientOpt{
			Addrs: cl.Addrs, Username: cl.Username, Password: cl.Password, TLSConfig: tlsConfig(cl.TLS),
		}, nil
	}
	opts, err := redis.ParseURL(rc.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis.url %s: %s", jobs.RedactURL(rc.URL), urlErr(err))
	}
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), asynq.RedisClientOpt{
		Network: opts.Network, Addr: opts.Addr, Username: opts.Username, Password: opts.Password, DB: opts.DB,
		DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout,
		PoolSize: opts.PoolSize, TLSConfig: opts.TLSConfig,
	}, nil
}

// urlErr is a URL parse error without the URL itself (url.Error quotes it,
// password included).
func urlErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// describeRedis names the queue Redis for logs, without secrets.
func describeRedis(cfg *jobs.Config) string {
	switch {
	case cfg.Redis.Sentinel != nil:
		return fmt.Sprintf("sentinel master %q via %v", cfg.Redis.Sentinel.Master, cfg.Redis.Sentinel.Addrs)
	case cfg.Redis.Cluster != nil:
		return fmt.Sprintf("cluster %v", cfg.Redis.Cluster.Addrs)
	}
	return jobs.RedactURL(cfg.Redis.URL)
}

// start connects: it checks the queue Redis answers and starts the worker.
func (rp *replica) start(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rp.queue.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("replica %s: queue Redis %s does not answer: %w", rp.id, describeRedis(rp.cfg), err)
	}
	if err := rp.worker.Start(); err != nil {
		return fmt.Errorf("replica %s: start worker: %w", rp.id, err)
	}
	if rp.singles != nil {
		if err := rp.singles.Start(); err != nil {
			return fmt.Errorf("replica %s: start singleton jobs: %w", rp.id, err)
		}
	}
	return nil
}

// run runs the replica until ctx ends, then shuts it down:
//
//  1. ctx ending cancels the scheduler's Run: it stops claiming ticks, lets
//     claims in flight commit or release their tick leases, and returns.
//  2. singleton jobs stop (SIGTERM, then SIGKILL) and resign, so a standby
//     replica takes over at once, not after the lease ttl;
//  3. worker.Shutdown: asynq stops fetching, running jobs get
//     worker.shutdown_grace to finish, then are cancelled (their tasks go
//     back to the queue, exec children are killed); every run releases its
//     execution lease. The scheduler stops first because it hands local
//     ticks to this worker.
//  4. close: the asynq client, the lock client (no lease is left to
//     extend) and the Redis connections.
//
// It returns the scheduler's error, or the worker's shutdown error.
func (rp *replica) run(ctx context.Context) error {
	rp.log.Info("replica started", "replica", rp.id, "role", rp.role.String())
	var err error
	if rp.leader != nil {
		lctx, stop := context.WithCancel(ctx)
		done := rp.leader.start(lctx)
		defer func() { stop(); <-done }()
	}
	if rp.sched != nil {
		err = rp.sched.Run(ctx)
	} else {
		<-ctx.Done()
	}
	rp.log.Info("replica stopping: no new ticks; waiting for running jobs", "replica", rp.id, "grace", rp.cfg.Worker.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), rp.cfg.Worker.ShutdownGrace+10*time.Second)
	defer cancel()
	if rp.singles != nil {
		if serr := rp.singles.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("replica %s: singleton jobs: %w", rp.id, serr))
		}
	}
	if serr := rp.worker.Shutdown(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("replica %s: %w", rp.id, serr))
	}
	rp.close()
	rp.log.Info("replica stopped", "replica", rp.id)
	return err
}

// close releases what the replica holds. It is safe on a half-built replica.
func (rp *replica) close() {
	if rp.client != nil {
		_ = rp.client.Close()
		rp.client = nil
	}
	if rp.locks != nil {
		_ = rp.locks.Close()
		rp.locks = nil
	}
	for _, c := range rp.own {
		_ = c.Close()
	}
	rp.own = nil
}

// ready reports why the replica is not ready, or "" when it is: the queue
// Redis and a majority of lock masters answer PING, and the scheduler's clock
// is within the skew bound.
func (rp *replica) ready(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rp.queue.Ping(ctx).Err(); err != nil {
		return fmt.Sprintf("replica %s: queue Redis does not answer PING: %s", rp.id, errClass(err))
	}
	if len(rp.cfg.Locking.Masters) > 0 {
		up := 0
		var last error
		for _, m := range rp.mast {
			if err := m.Ping(ctx).Err(); err != nil {
				last = err
				continue
			}
			up++
		}
		if need := len(rp.mast)/2 + 1; up < need {
			return fmt.Sprintf("replica %s: %d of %d lock masters answer PING, %d needed: %s", rp.id, up, len(rp.mast), need, errClass(last))
		}
	}
	if rp.sched != nil && rp.sched.Skewed() {
		return fmt.Sprintf("replica %s: clock off Redis TIME beyond max_clock_skew %v: not claiming ticks", rp.id, rp.cfg.MaxClockSkew)
	}
	return ""
}

// errClass names the kind of a Redis error without the error's text, which
// can hold an address (for /readyz, which anyone who reaches it may read).
func errClass(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, redis.ErrClosed):
		return "client closed"
	case strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS"):
		return "authentication failed"
	}
	return "error"
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

// start campaigns until ctx ends, leading while it can; on ctx's end it
// resigns, which wakes the next candidate. The returned channel closes
// when it is done.
func (l *leadership) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
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
	}()
	return done
}

// freshOpt is the lock client's fresh-deployment opt-in of cfg (nil: none).
func freshOpt(cfg *jobs.Config) locking.Option {
	if cfg.Locking.FreshDeployment {
		return locking.WithFreshDeployment()
	}
	return nil
}
