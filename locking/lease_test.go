package locking_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// releaseIn releases l in one round trip of p's client with a write of the
// caller's, and returns the release's answer.
func releaseIn(t *testing.T, ctx context.Context, rdb *redis.Client, l *locking.Lease) (queued int, err error) {
	t.Helper()
	p := rdb.Pipeline()
	p.Set(ctx, "callers-own-write", "1", time.Minute)
	finish := l.ReleaseIn(ctx, p)
	queued = p.Len()
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Logf("pipeline: %v", err)
	}
	return queued, finish()
}

// loadScripts has c's master load the lock scripts (a lock taken and
// released), so a test's pipelined release finds its script there.
func loadScripts(t *testing.T, ctx context.Context, c *locking.Client) {
	t.Helper()
	warm, err := c.TryLock(ctx, "warm", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// On one master, a lease released in the caller's round trip frees its
// key there and then: the lock client sends nothing of its own, the lease
// has ended as released, and the key can be taken again.
func TestReleaseInFreesTheKeyInTheCallersRoundTrip(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, c)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := redistest.CommandCalls(t, rdb)["evalsha"]
	queued, err := releaseIn(t, ctx, rdb, l)
	if err != nil {
		t.Fatalf("ReleaseIn: %v", err)
	}
	if queued != 2 {
		t.Errorf("%d commands in the caller's pipeline, want its own write and the release", queued)
	}
	if got := redistest.CommandCalls(t, rdb)["evalsha"] - before; got != 1 {
		t.Errorf("%d script calls for the release, want 1 (the one in the caller's round trip)", got)
	}
	if !errors.Is(l.Err(), locking.ErrReleased) {
		t.Errorf("lease error %v, want ErrReleased", l.Err())
	}
	select {
	case <-l.Done():
	default:
		t.Error("the lease's Done is not closed")
	}
	again, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("TryLock after ReleaseIn: %v", err)
	}
	_ = again.Release(ctx)
	if err := l.ReleaseIn(ctx, rdb.Pipeline())(); !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrReleased) {
		t.Errorf("a second ReleaseIn: %v, want ErrNotHeld and ErrReleased", err)
	}
}

// A release put in the caller's round trip wakes a waiter as Release does.
func TestReleaseInWakesAWaiter(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "w", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		// only the release's wake-up can hand it the key before its ttl
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := c.Lock(wctx, "w", time.Second)
		if err == nil {
			_ = w.Release(ctx)
		}
		got <- err
	}()
	registered(t, rdb, "w", 1)
	if _, err := releaseIn(t, ctx, rdb, l); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v, want the key once released", err)
	}
}

// A pipeline that went to a Redis other than the lock's master (a caller's
// mistake) never leaves the key held: the release finds no key there and
// is sent again on the lock client's own connection.
func TestReleaseInThroughAnotherRedisStillFreesTheKey(t *testing.T) {
	rdb, c := oneMaster(t)
	other := redistest.New(t).TestClient(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := releaseIn(t, ctx, other, l); err != nil {
		t.Fatalf("ReleaseIn through another Redis: %v", err)
	}
	if n := rdb.Exists(ctx, "baton:lock:{k}").Val(); n != 0 {
		t.Error("the key is still held on the master")
	}
}

// A server that does not hold the release script (restarted, SCRIPT FLUSH)
// answers the pipelined call NOSCRIPT: the release is sent again, whole.
func TestReleaseInAfterAScriptFlushFreesTheKey(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := releaseIn(t, ctx, rdb, l); err != nil {
		t.Fatalf("ReleaseIn after SCRIPT FLUSH: %v", err)
	}
	if n := rdb.Exists(ctx, "baton:lock:{k}").Val(); n != 0 {
		t.Error("the key is still held")
	}
}

// A lease whose key went (expired, evicted, deleted) is reported not held
// and lost, as Release reports it.
func TestReleaseInOfAKeyThatWentSaysNotHeld(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, "baton:lock:{k}").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = releaseIn(t, ctx, rdb, l)
	if !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("ReleaseIn of a deleted key: %v, want ErrNotHeld and ErrLost", err)
	}
}

// With several masters nothing goes into the caller's pipeline (it reaches
// one master at most): finish releases on every master, as Release does.
func TestReleaseInOnSeveralMastersReleasesEverywhere(t *testing.T) {
	rdbs := clientsOf(t, redistest.New(t), redistest.New(t), redistest.New(t))
	c := newClient(t, rdbs)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := releaseIn(t, ctx, rdbs[0], l)
	if err != nil {
		t.Fatalf("ReleaseIn: %v", err)
	}
	if queued != 1 {
		t.Errorf("%d commands in the caller's pipeline, want only its own write", queued)
	}
	for i, r := range rdbs {
		if n := r.Exists(ctx, "baton:lock:{k}").Val(); n != 0 {
			t.Errorf("master %d still holds the key", i)
		}
	}
}

// pauseOnExtend is a go-redis hook on a lock client's connection: the first
// extension it sees pauses the server (CLIENT PAUSE ALL, from another
// client) before it is sent; extended closes once its answer came.
type pauseOnExtend struct {
	pauser   *redis.Client
	d        time.Duration
	once     sync.Once
	seen     chan struct{}
	extended chan struct{}
}

func (h *pauseOnExtend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseOnExtend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h *pauseOnExtend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

func (h *pauseOnExtend) around(cmds []redis.Cmder, send func() error) error {
	first := false
	for _, c := range cmds {
		// the extension's call: one key, the token and the ttl
		if a := c.Args(); len(a) == 6 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[3]) == "baton:lock:{x}" {
			h.once.Do(func() {
				first = true
				if err := h.pauser.Do(context.Background(), "CLIENT", "PAUSE", h.d.Milliseconds(), "ALL").Err(); err != nil {
					panic(err)
				}
				close(h.seen)
			})
		}
	}
	err := send()
	if first {
		close(h.extended)
	}
	return err
}

// A release put in the caller's round trip does not wait for the lease's
// extension under way (a stalled server): the caller's round trip, bounded
// for its own writes, must not be spent before it is sent. The release,
// sent once the server answers again, frees the key.
func TestReleaseInDoesNotWaitForAnExtensionUnderWay(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	lrdb := srv.TestClient(t)
	h := &pauseOnExtend{pauser: rdb, d: time.Second, seen: make(chan struct{}), extended: make(chan struct{})}
	lrdb.AddHook(h)
	c := newClient(t, []*redis.Client{lrdb}, locking.WithMasterTimeout(10*time.Second))
	ctx := testCtx(t)
	loadScripts(t, ctx, c)
	// extended after a second; the pause ends before the key's ttl
	l, err := c.TryLock(ctx, "x", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.seen:
	case <-ctx.Done():
		t.Fatal("no extension of the lease was seen")
	}
	// the caller's client waits out the pause
	p := srv.TestClient(t, func(o *redis.Options) { o.ReadTimeout = 20 * time.Second }).Pipeline()
	finish := l.ReleaseIn(ctx, p)
	select {
	case <-h.extended:
		t.Fatal("ReleaseIn returned only after the extension under way was answered")
	default:
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatalf("the caller's round trip: %v", err)
	}
	if err := finish(); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if n := rdb.Exists(ctx, "baton:lock:{x}").Val(); n != 0 {
		t.Error("the key is still held")
	}
}
