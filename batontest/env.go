package batontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/devredis"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// MaxAhead is how far the fake clock may run ahead of the real one, and the
// max_clock_skew an Env gives its config (see the package doc).
const MaxAhead = 10 * 365 * 24 * time.Hour

// ReplicaID is the id of an Env's replica, as the run history names it.
const ReplicaID = "batontest"

// Option configures New.
type Option func(*options)

type options struct {
	handlers *jobs.Registry
	redisURL string
	start    time.Time
	timeout  time.Duration
	log      *slog.Logger
}

// WithHandlers registers the Go handlers that the config's handler jobs
// name (default: none).
func WithHandlers(r *jobs.Registry) Option { return func(o *options) { o.handlers = r } }

// WithRedis runs the Env on the Redis at url (redis:// or rediss://)
// instead of an embedded server; see the package doc for what that changes.
// Default: an embedded server per Env.
func WithRedis(url string) Option { return func(o *options) { o.redisURL = url } }

// WithStart sets the fake clock's first reading (default: the next whole
// minute of the real clock). On a real Redis it must not be before Redis
// TIME.
func WithStart(t time.Time) Option { return func(o *options) { o.start = t } }

// WithTimeout bounds how long AdvanceTo waits, in real time, for the ticks
// of one instant to settle before it fails the test (default 10s).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger of the replica (default: none).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Env is a baton replica on a fake clock, for one test. Its methods are
// called from the test's goroutine.
type Env struct {
	cfg     *config.Config
	clk     *clock.Fake
	srv     *devredis.Server // nil on a real Redis
	rdb     redis.UniversalClient
	timeout time.Duration
	start   time.Time
	next    map[string]time.Time // per job with ticks: its first tick not yet settled
	replica *baton.Replica
	runtime *runtimeJobs // the runtime schedules put through the Env

	mu      sync.Mutex
	cluster *baton.Cluster
}

// New starts an Env over the jobs of cfg, which it leaves unchanged (it
// runs a copy with the changes the package doc lists). It fails the test
// when the replica cannot be built or started.
func New(t testing.TB, cfg *config.Config, opts ...Option) *Env {
	t.Helper()
	o := options{timeout: 10 * time.Second, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.start.IsZero() {
		o.start = time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	}
	if o.start.After(time.Now().Add(MaxAhead)) {
		t.Fatalf("batontest: start %s is more than MaxAhead (%s) ahead of the real clock", o.start.Format(time.RFC3339), MaxAhead)
	}
	c := *cfg // the top-level fields below are values: the copy leaves cfg alone
	c.Locking.Masters = nil
	c.Locking.FreshDeployment = true // a new server, or a namespace of its own
	c.MaxClockSkew = MaxAhead
	c.Worker.PollInterval = 10 * time.Millisecond
	c.History = config.HistoryConfig{Runs: 100000, MaxAge: 2 * MaxAhead, StartAfter: 0}
	c.Schedules.History = c.History.Runs // runtime schedules' too
	e := &Env{timeout: o.timeout, start: o.start, next: map[string]time.Time{}, runtime: &runtimeJobs{byName: map[string]*config.Job{}}}

	if o.redisURL == "" {
		srv, err := devredis.StartAt(o.start)
		if err != nil {
			t.Fatalf("batontest: start the embedded server: %v", err)
		}
		t.Cleanup(srv.Close)
		e.srv = srv
		c.Redis = config.RedisConfig{URL: srv.URL()}
	} else {
		c.Redis = config.RedisConfig{URL: o.redisURL}
		c.Namespace = uniqueNamespace(c.Namespace)
	}
	// the Env's own lookups by name find the runtime schedules put
	// through it (PutSchedule); the replica follows them from Redis
	e.cfg = c.WithSource(e.runtime)
	rdb, err := redis.ParseURL(c.Redis.URL)
	if err != nil {
		t.Fatalf("batontest: redis url: %v", err)
	}
	e.rdb = redis.NewClient(rdb)
	t.Cleanup(func() { _ = e.rdb.Close() })
	if e.srv == nil {
		e.onRealRedis(t)
	}
	e.clk = clock.NewFake(o.start)

	r, err := baton.New(e.cfg, baton.WithReplicaID(ReplicaID), baton.WithHandlers(o.handlers),
		baton.WithLogger(o.log), baton.WithSchedulerClock(e.clk), baton.WithLockMessageFilter(wiring.WithoutConfigCommand))
	if err != nil {
		t.Fatalf("batontest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	e.replica = r
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("batontest: replica: %v", err)
			}
		case <-time.After(e.cfg.Worker.ShutdownGrace + 20*time.Second):
			t.Errorf("batontest: the replica did not stop within worker.shutdown_grace %s", e.cfg.Worker.ShutdownGrace)
		}
		e.mu.Lock()
		if e.cluster != nil {
			e.cluster.Close()
		}
		e.mu.Unlock()
	})

	// the scheduler reads the clock once at its start, to list the first
	// ticks: it must have done so, and wait on its timers, before the clock
	// moves (membership, skew and held-tick loops, and the tick loop)
	waiters := 3
	for _, j := range e.cfg.Jobs {
		if j.Mode == config.ModeSingleton || j.Sched == nil {
			continue
		}
		if next := j.Sched.Next(o.start); !next.IsZero() {
			e.next[j.Name] = next.UTC()
			waiters = 4
		}
	}
	if err := e.clk.BlockUntil(waiters); err != nil {
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("batontest: the replica stopped at its start: %v", err)
		default:
		}
		t.Fatalf("batontest: the scheduler did not start: %v", err)
	}
	e.awaitLeadership(t, done)
	return e
}

// awaitLeadership waits, when a job is claimed only by the cluster's leader
// (leader: true), until the replica leads: ticks fired before then would
// not be claimed at all.
func (e *Env) awaitLeadership(t testing.TB, done chan error) {
	t.Helper()
	if !slices.ContainsFunc(e.cfg.Jobs, func(j config.Job) bool { return j.Leader }) {
		return
	}
	// the replica's own view, not the election's record in Redis, which
	// names it a moment before it claims as the leader
	leads := e.replica.Leading
	if !poll.Until(e.timeout, leads) {
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("batontest: the replica stopped: %v", err)
		default:
		}
		t.Fatalf("batontest: the replica did not become the cluster's leader within %s (its config has leader: true jobs)", e.timeout)
	}
}

// Load is New with a config loaded from YAML, which may leave out redis:
// the Env sets it. It fails the test on an invalid config, with every
// error and its line.
func Load(t testing.TB, yaml string, opts ...Option) *Env {
	t.Helper()
	y := strings.TrimRight(yaml, "\n") + "\n"
	if !hasTopLevel(y, "redis") {
		// appended, so the errors' line numbers are the caller's
		y += "redis:\n  url: redis://127.0.0.1:6379/0\n"
	}
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatalf("batontest: config: %v", err)
	}
	return New(t, cfg, opts...)
}

// hasTopLevel tells whether the YAML document y has the top-level key.
func hasTopLevel(y, key string) bool {
	for line := range strings.SplitSeq(y, "\n") {
		if strings.HasPrefix(line, key+":") {
			return true
		}
	}
	return false
}

// onRealRedis checks the start against Redis TIME and deletes the Env's
// keys at the end of the test.
func (e *Env) onRealRedis(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatalf("batontest: Redis at %s: %v", e.rdb.(*redis.Client).Options().Addr, err)
	}
	if e.start.Before(now.Add(-time.Second)) {
		t.Fatalf("batontest: start %s is before Redis TIME %s: on a real Redis the fake clock cannot run behind Redis's (the claim would find the ticks missed); start later, or use the embedded server",
			e.start.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ns := e.cfg.Namespace
		for _, match := range namespacePatterns(ns) {
			iter := e.rdb.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				e.rdb.Del(ctx, iter.Val())
			}
		}
		for q := range e.cfg.Worker.Queues {
			for _, lane := range e.cfg.QueueLanes(q) {
				e.rdb.SRem(ctx, asynqQueuesKey, lane)
			}
		}
	})
}

// uniqueNamespace is ns with a random suffix, within the 64 characters a
// namespace may have.
func uniqueNamespace(ns string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return ns[:min(len(ns), 55)] + "-" + hex.EncodeToString(b[:])
}

// Config is the config the Env runs (with the Env's changes).
func (e *Env) Config() *config.Config { return e.cfg }

// Clock is the fake clock the scheduler reads. Only AdvanceTo and Advance
// move it.
func (e *Env) Clock() scheduler.Clock { return e.clk }

// Now is the fake clock's time.
func (e *Env) Now() time.Time { return e.clk.Now() }

// Redis is a client of the Env's Redis (the queue Redis and lock master),
// closed when the test ends.
func (e *Env) Redis() redis.UniversalClient { return e.rdb }

// Cluster is a baton.Cluster over the Env's config, to pause, resume or
// trigger its jobs as an operator would; closed when the test ends.
func (e *Env) Cluster(t testing.TB) *baton.Cluster {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cluster == nil {
		c, err := baton.NewCluster(e.cfg)
		if err != nil {
			t.Fatalf("batontest: cluster: %v", err)
		}
		e.cluster = c
	}
	return e.cluster
}
