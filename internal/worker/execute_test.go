package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// tripLog is a go-redis hook on the worker's own clients that keeps the
// commands of every round trip (a command alone, or a pipeline), and can
// fail the round trips that carry a given command before they are sent.
type tripLog struct {
	mu    sync.Mutex
	trips [][]string // each command as "name key"
	fail  func(cmds []string) bool
}

func cmdLine(c redis.Cmder) string {
	args := c.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	switch {
	case (name == "evalsha" || name == "eval") && len(args) > 3:
		return name + " " + fmt.Sprint(args[3])
	case len(args) > 1:
		return name + " " + fmt.Sprint(args[1])
	}
	return name
}

func (l *tripLog) record(cmds []redis.Cmder) error {
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		lines[i] = cmdLine(c)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil && l.fail(lines) {
		l.fail = nil // once
		return errors.New("round trip failed by the test")
	}
	l.trips = append(l.trips, lines)
	return nil
}

func (l *tripLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *tripLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := l.record([]redis.Cmder{cmd}); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (l *tripLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := l.record(cmds); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// with returns the round trips that carry a command starting with prefix.
func (l *tripLog) with(prefix string) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for _, tr := range l.trips {
		for _, c := range tr {
			if strings.HasPrefix(c, prefix) {
				out = append(out, tr)
				break
			}
		}
	}
	return out
}

// hookedOpt makes the worker's Redis clients with h as a hook.
type hookedOpt struct {
	asynq.RedisClientOpt
	h redis.Hook
}

func (o hookedOpt) MakeRedisClient() any {
	c := o.RedisClientOpt.MakeRedisClient().(*redis.Client)
	c.AddHook(o.h)
	return c
}

// tripTo waits until a round trip carries a command starting with prefix
// and returns the first that does.
func tripTo(t *testing.T, l *tripLog, prefix string) []string {
	t.Helper()
	if !poll.Until(worktest.Wait, func() bool { return len(l.with(prefix)) > 0 }) {
		t.Fatalf("no round trip carried %q", prefix)
	}
	return l.with(prefix)[0]
}

func carries(trip []string, prefix string) bool {
	for _, c := range trip {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// touches reports whether a command of trip is on key.
func touches(trip []string, key string) bool {
	for _, c := range trip {
		if strings.HasSuffix(c, " "+key) {
			return true
		}
	}
	return false
}

const quickJob = `  - name: quick
    schedule: "@every 1m"
    handler: {name: quick}
`

// A run's start records its holder in the round trip of its "started"
// history entry: one round trip to the queue Redis, not two.
func TestRunStartRecordsItsHolderWithItsHistoryEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	exec := newFakeExec(nil)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, exec)
	tk := worktest.TickOf("quick", 1)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	trip := tripTo(t, l, "set "+holderKey("baton", "quick"))
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the holder record went in %v, without the run's history entry", trip)
	}
}

// A successful run's end writes its tick's ledger record in the round trip
// of its history entry, and the record is written once.
func TestSuccessfulRunWritesItsLedgerRecordWithItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil))
	tk := worktest.TickOf("quick", 2)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	rec := "set " + tickRecordKey("baton", tk)
	trip := tripTo(t, l, rec)
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the ledger record went in %v, without the run's history entry", trip)
	}
	if n := len(l.with(rec)); n != 1 {
		t.Errorf("the ledger record was written in %d round trips, want 1", n)
	}
	wantDone(t, e, tk)
}

// When the round trip of a successful run's end fails, the tick's ledger
// record is still written (alone), so a copy of its task put back is
// refused.
func TestLedgerRecordIsWrittenAloneWhenTheEndsRoundTripFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := worktest.TickOf("quick", 3)
	rec := "set " + tickRecordKey("baton", tk)
	l := &tripLog{fail: func(cmds []string) bool { return len(cmds) > 1 && carries(cmds, rec) }}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil))
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	wantDone(t, e, tk)
	if trips := l.with(rec); len(trips) != 1 || len(trips[0]) != 1 {
		t.Errorf("ledger record round trips %v, want one alone after the failed end", trips)
	}
}

// Where the queue Redis is the only lock master, a run's end gives its
// execution lease back in the round trip of its history entry (after the
// ledger record), and the lease is free once the run ended.
func TestRunEndReleasesItsLeaseInItsRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil), WithQueueAsLockMaster())
	tk := worktest.TickOf("quick", 4)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	release := "evalsha baton:lock:{exec:quick}"
	trip := tripTo(t, l, release)
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the lease's release went in %v, without the run's end", trip)
	}
	rec, rel := -1, -1
	for i, c := range trip {
		switch {
		case strings.HasPrefix(c, "set "+tickRecordKey("baton", tk)):
			rec = i
		case strings.HasPrefix(c, release):
			rel = i
		}
	}
	if rec < 0 || rel < rec {
		t.Errorf("round trip %v: want the ledger record before the lease's release", trip)
	}
	if n := e.RDB.Exists(context.Background(), "baton:lock:{exec:quick}").Val(); n != 0 {
		t.Error("the execution lease is still held after the run ended")
	}
}

// When the round trip of a run's end fails, its execution lease is still
// released at once (on the lock client's own connection), not left to
// expire at its ttl.
func TestLeaseIsReleasedWhenTheEndsRoundTripFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := "evalsha baton:lock:{exec:quick}"
	l := &tripLog{fail: func(cmds []string) bool { return carries(cmds, release) }}
	cfg := e.Config(t, quickJob) // lock_ttl 30s: longer than the wait below
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil), WithQueueAsLockMaster())
	tk := worktest.TickOf("quick", 5)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	if !poll.Until(worktest.Wait, func() bool {
		return e.RDB.Exists(context.Background(), "baton:lock:{exec:quick}").Val() == 0
	}) {
		t.Fatal("the execution lease is still held after the end's round trip failed")
	}
	wantDone(t, e, tk)
}

// pauseOnExtend is a go-redis hook on a lock client's connection: the first
// time it sees the extension of lock key, it pauses the whole server
// (CLIENT PAUSE ALL, for d) with another client, says so on seen, and only
// then sends the extension, which the server answers when the pause ends.
type pauseOnExtend struct {
	key, ttlMs string
	pauser     *redis.Client
	d          time.Duration
	once       sync.Once
	seen       chan struct{}
}

func (h *pauseOnExtend) extension(c redis.Cmder) bool {
	a := c.Args()
	return len(a) == 6 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[2]) == "1" &&
		fmt.Sprint(a[3]) == h.key && fmt.Sprint(a[5]) == h.ttlMs
}

func (h *pauseOnExtend) maybePause(cmds []redis.Cmder) {
	for _, c := range cmds {
		if h.extension(c) {
			h.once.Do(func() {
				if err := h.pauser.Do(context.Background(), "CLIENT", "PAUSE", h.d.Milliseconds(), "ALL").Err(); err != nil {
					panic(err)
				}
				close(h.seen)
			})
		}
	}
}

func (h *pauseOnExtend) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pauseOnExtend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.maybePause([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (h *pauseOnExtend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.maybePause(cmds)
		return next(ctx, cmds)
	}
}

// wiredLocks is a locking client over e's Redis, its go-redis client made
// as baton's wiring makes the queue Redis's (ContextTimeoutEnabled), with
// hooks; both closed at cleanup.
func wiredLocks(t *testing.T, e *env, hooks ...redis.Hook) *locking.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: e.Srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	locks, err := locking.New(rdb, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	return locks
}

// A run that ends while its lease's extension is in flight (the server
// stalls for 2.5s: CLIENT PAUSE, a fork, a failover's pause) still gets its
// end record: the end's round trip waits for the server as it did before
// (the worker's queue client has go-redis's 3s read timeout) and must not
// be spent waiting for the lease's extender before it is even sent.
// The queue Redis is the only lock master (WithQueueAsLockMaster); the lock
// client is configured as baton's wiring makes it (ContextTimeoutEnabled).
func TestRunEndIsRecordedWhenItEndsDuringItsLeasesExtension(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: quick
    schedule: "@every 1m"
    lock_ttl: 6s
    handler: {name: quick}
`)
	h := &pauseOnExtend{key: "baton:lock:{exec:quick}", ttlMs: "6000", pauser: e.RDB, d: 2500 * time.Millisecond, seen: make(chan struct{})}
	locks := wiredLocks(t, e, h)
	// the run ends as soon as its lease's first extension is under way
	exec := newFakeExec(func(ctx context.Context, _ jobs.Run, _ executor.Validity) error {
		select {
		case <-h.seen:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	e.workerWith(t, e.Opt, locks, cfg, exec, WithQueueAsLockMaster())
	tk := worktest.TickOf("quick", 7)
	e.dispatch(t, cfg, tk)
	statusOf(t, e, tk, jobs.StatusOK)
	if !poll.Until(worktest.Wait, func() bool {
		return e.RDB.Exists(context.Background(), "baton:lock:{exec:quick}").Val() == 0
	}) {
		t.Error("the execution lease is still held after the run ended")
	}
}

// pauseOnPipeline is a go-redis hook on the worker's queue clients: the
// first pipeline that carries a command on key pauses the whole server
// (CLIENT PAUSE ALL, for d) with another client just before it is sent.
type pauseOnPipeline struct {
	key    string
	pauser *redis.Client
	d      time.Duration
	once   sync.Once
	at     time.Time
	done   chan struct{}
}

func (h *pauseOnPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pauseOnPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pauseOnPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && strings.HasPrefix(strings.ToLower(a[0].(string)), "set") && a[1] == h.key {
				h.once.Do(func() {
					h.at = time.Now()
					if err := h.pauser.Do(context.Background(), "CLIENT", "PAUSE", h.d.Milliseconds(), "ALL").Err(); err != nil {
						panic(err)
					}
					close(h.done)
				})
			}
		}
		return next(ctx, cmds)
	}
}

// The queue Redis (the only lock master) stalls for 8s just as a run's end
// is sent (CLIENT PAUSE ALL; a fork, a failover's pause, a slow script).
// Once it answers again, the run's execution lease must be free at once,
// not held to its ttl (15s): the next tick would be skipped, "another run
// holds the job". Before the change the release waited up to lock_ttl; the
// resend must wait as long, not only what is left of the end's 2s trip. The
// lock client is configured as baton's wiring makes it
// (ContextTimeoutEnabled, go-redis defaults: 5s read timeout).
func TestLeaseIsFreedWhenTheQueueRedisStallsAtTheRunsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: quick
    schedule: "@every 1m"
    lock_ttl: 15s
    handler: {name: quick}
`)
	tk := worktest.TickOf("quick", 8)
	h := &pauseOnPipeline{key: tickRecordKey("baton", tk), pauser: e.RDB, d: 8 * time.Second, done: make(chan struct{})}
	locks := wiredLocks(t, e)
	e.workerWith(t, hookedOpt{e.Opt, h}, locks, cfg, newFakeExec(nil), WithQueueAsLockMaster())
	e.dispatch(t, cfg, tk)
	worktest.Recv(t, h.done, "the run's end sent")
	// released, the key goes with seconds of its ttl left; left to expire,
	// it goes with none: the last ttl read before it went tells which
	last := time.Duration(-1)
	poll.Require(t, 30*time.Second, "the execution lease gone", func() bool {
		ttl, err := e.RDB.PTTL(context.Background(), "baton:lock:{exec:quick}").Result()
		if err != nil || ttl < 0 {
			return err == nil
		}
		last = ttl
		return false
	})
	if last >= 0 && last < 2*time.Second {
		t.Fatalf("the execution lease went with %v of its ttl left: it expired rather than being released once the queue Redis answered again", last)
	}
}

// ledgerWatch is a go-redis hook on the nodes of the worker's cluster
// clients: a pipeline that carries the ledger record's SET is held back
// 300ms (a slower node), then sent; it notes whether the execution lease
// was still held at that moment.
type ledgerWatch struct {
	rec, lock string
	probe     *redis.ClusterClient
	mu        sync.Mutex
	seen      bool
	heldThen  bool
}

func (h *ledgerWatch) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *ledgerWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *ledgerWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && fmt.Sprint(a[0]) == "set" && a[1] == h.rec {
				time.Sleep(300 * time.Millisecond)
				held := h.probe.Exists(context.Background(), h.lock).Val() == 1
				h.mu.Lock()
				if !h.seen {
					h.seen, h.heldThen = true, held
				}
				h.mu.Unlock()
			}
		}
		return next(ctx, cmds)
	}
}

type watchedClusterOpt struct {
	asynq.RedisClusterClientOpt
	h *ledgerWatch
}

func (o watchedClusterOpt) MakeRedisClient() any {
	c := o.RedisClusterClientOpt.MakeRedisClient().(*redis.ClusterClient)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(o.h) })
	return c
}

// On a Redis Cluster as the queue Redis and only lock master (baton with
// redis.cluster and no locking.masters), a successful run's ledger record
// is written before its execution lease is free: a copy of the task put
// back and admitted once the lease is free must find the tick done. Job
// "sync": its ledger record ({sync}) and its lease ({exec:sync}) live on
// different nodes; the ledger's node answers 300ms later than the lease's.
func TestLedgerRecordIsWrittenBeforeTheLeaseIsFreeOnACluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.NewCluster(t)
	cfg, err := config.Load(fmt.Appendf(nil, "redis: {cluster: {addrs: [%q]}}\nworker: {shutdown_grace: 2s}\njobs:\n  - name: sync\n    schedule: \"@every 1m\"\n    handler: {name: sync}\n", addrs[0]))
	if err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = probe.Close() })
	lrdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = lrdb.Close() })
	locks, err := locking.New(lrdb, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	// the release script is loaded on the lease's node, as after any
	// earlier run there
	warm, err := locks.TryLock(context.Background(), "exec:sync", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	tk := worktest.TickOf("sync", 9)
	h := &ledgerWatch{rec: tickRecordKey("baton", tk), lock: "baton:lock:{exec:sync}", probe: probe}
	opt := asynq.RedisClusterClientOpt{Addrs: addrs}
	w := New(cfg, watchedClusterOpt{opt, h}, locks, newFakeExec(nil), WithPollIntervals(10*time.Millisecond, 20*time.Millisecond),
		WithLogger(worktest.Logger(t)), WithQueueAsLockMaster())
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWithin(t, w) })
	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if err := handoff.New(cfg, client, nil, handoff.WithQueueRedis(probe)).Dispatch(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, worktest.Wait, "the ledger record written in the run's end", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.seen
	})
	if !h.heldThen {
		t.Error("the execution lease was free before the tick's ledger record was sent")
	}
}

// wantDone waits until tick tk's ledger record says done.
func wantDone(t *testing.T, e *env, tk scheduler.Tick) {
	t.Helper()
	if !poll.Until(worktest.Wait, func() bool {
		done, _, _ := readTickRecord(context.Background(), e.RDB, "baton", tk)
		return done
	}) {
		t.Fatal("the tick's ledger record does not say done after its run")
	}
}

// slowTrips is a go-redis hook that delays, by delay, every round trip to
// the queue Redis that carries a command starting with prefix: a late
// reply (a Redis stalled by a fork, a slow link).
type slowTrips struct {
	prefix string
	delay  time.Duration
}

func (s slowTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s slowTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmdLine(cmd), s.prefix) {
			time.Sleep(s.delay)
		}
		return next(ctx, cmd)
	}
}

func (s slowTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if strings.HasPrefix(cmdLine(c), s.prefix) {
				time.Sleep(s.delay)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// Schedule: the queue Redis answers the run's first round trip late
// (300 ms: a fork, a slow link). The holder record, which decides whether a
// retry of the same tick that finds the lease busy waits for this run or
// skips its tick (forbid), and what status shows as the holder, must be
// written while the run holds the lease, not given up after the history
// start's 250 ms and left missing until its first refresh at lock_ttl/3.
func TestHolderRecordIsWrittenWhenTheStartsRoundTripIsSlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, quickJob) // lock_ttl 30s: the first refresh comes after 10s
	gate := make(chan struct{})
	defer close(gate)
	exec := newFakeExec(blockUntil(gate))
	e.workerOn(t, hookedOpt{e.Opt, slowTrips{prefix: "set " + holderKey("baton", "quick"), delay: 300 * time.Millisecond}}, cfg, exec)
	tk := worktest.TickOf("quick", 4)
	e.dispatch(t, cfg, tk)
	select {
	case <-exec.started:
	case <-time.After(worktest.Wait):
		t.Fatal("the run did not start")
	}
	ctx := context.Background()
	if !poll.Until(3*time.Second, func() bool { return e.RDB.Exists(ctx, holderKey("baton", "quick")).Val() == 1 }) {
		t.Fatal("the run holds the job's lease, and 3s after its start no holder record names it")
	}
}
