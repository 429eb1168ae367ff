package locking_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// strictClient is a client that does not treat brand-new masters as fresh
// (the production default), with a one-minute quarantine.
func strictClient(t *testing.T, servers ...*redistest.Server) *locking.Client {
	t.Helper()
	ms := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		ms[i] = s.TestClient(t)
	}
	c, err := locking.NewQuorum(ms, locking.WithMasterTimeout(time.Second), locking.WithRestartQuarantine(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A brand-new server, before any call: not marked yet, no marker; after the
// first lock call marks it: in its quarantine, why and until when by its
// clock; the lock's error says so and names the way out.
func TestBrandNewMasterShowsQuarantineWithReasonAndEnd(t *testing.T) {
	srv := redistest.New(t)
	c := strictClient(t, srv)
	ctx := testCtx(t)
	st := c.Masters(ctx)
	if len(st) != 1 || st[0].State != locking.MasterRepairing || st[0].Why != locking.WhyNoMarker || st[0].Addr != srv.Addr() {
		t.Fatalf("before any call: %+v, want repairing with %q", st, locking.WhyNoMarker)
	}
	_, err := c.TryLock(ctx, "k", time.Second)
	if !errors.Is(err, locking.ErrQuarantine) || !errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("TryLock on a brand-new master: %v, want ErrQuarantine", err)
	}
	for _, want := range []string{"master 0 (" + srv.Addr() + ")", "restart quarantine until", locking.WhyNoMarker, "baton init"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("TryLock's error %q does not say %q", err, want)
		}
	}
	st = c.Masters(ctx)
	m := st[0]
	if m.State != locking.MasterQuarantine || m.Why != locking.WhyNoMarker {
		t.Fatalf("after the first call: %+v, want quarantine with %q", m, locking.WhyNoMarker)
	}
	now, _ := srv.TestClient(t).Time(ctx).Result()
	if left := m.Until.Sub(now); left < 50*time.Second || left > time.Minute {
		t.Errorf("quarantine ends %v after the master's now, want about a minute", left)
	}
	if left := time.Until(m.UntilLocal); left < 50*time.Second || left > time.Minute+time.Second {
		t.Errorf("quarantine ends %v from now by this clock, want about a minute", left)
	}
}

// baton init's library call on brand-new masters: every master votes at
// once, and a lock is obtained with no wait.
func TestInitFreshLetsBrandNewMastersGrantAtOnce(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := strictClient(t, servers...)
	ctx := testCtx(t)
	if err := c.InitFresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Masters(ctx) {
		if m.State != locking.MasterVoting {
			t.Errorf("master %d after InitFresh: %+v, want voting", m.Index, m)
		}
	}
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("TryLock right after InitFresh: %v", err)
	}
	_ = l.Release(ctx)
}

// InitFresh refuses, naming the master and marking nothing, when a master
// carries a marker: run twice, and on a set where one master is in use.
func TestInitFreshRefusesMastersThatCarryAMarker(t *testing.T) {
	servers := redistest.NewN(t, 2)
	ctx := testCtx(t)
	used := strictClient(t, servers[0])
	_, _ = used.TryLock(ctx, "k", time.Second) // marks it: no marker found
	c := strictClient(t, servers...)
	err := c.InitFresh(ctx)
	if !errors.Is(err, locking.ErrMarked) || !strings.Contains(err.Error(), "master 0 ("+servers[0].Addr()+") carries a marker") {
		t.Fatalf("InitFresh with master 0 in use: %v, want ErrMarked naming master 0", err)
	}
	if !strings.Contains(err.Error(), "its restart quarantine ends by itself at ") || !strings.Contains(err.Error(), "nothing to do but wait") {
		t.Errorf("InitFresh on a master a client marked first: %v, want it to say that the quarantine ends by itself, when, and to wait", err)
	}
	if strings.Contains(err.Error(), "master 1") {
		t.Errorf("InitFresh named master 1, which carries no marker: %v", err)
	}
	if n := servers[1].TestClient(t).Exists(ctx, "baton:lock:marker").Val(); n != 0 {
		t.Fatal("InitFresh refused but marked master 1")
	}

	fresh := strictClient(t, servers[1])
	if err := fresh.InitFresh(ctx); err != nil {
		t.Fatal(err)
	}
	err = fresh.InitFresh(ctx)
	if !errors.Is(err, locking.ErrMarked) || !strings.Contains(err.Error(), "master 0 ("+servers[1].Addr()+") carries a marker of its running process, marked as a brand-new set already") {
		t.Fatalf("InitFresh run twice: %v, want ErrMarked naming the master", err)
	}
}

// A master that restarts empty after InitFresh waits out its quarantine as
// always: marking once gives up no restart safety.
func TestMasterRestartedEmptyAfterInitFreshWaitsOutQuarantine(t *testing.T) {
	srv := redistest.New(t)
	c := strictClient(t, srv)
	ctx := testCtx(t)
	if err := c.InitFresh(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the restarted master found in quarantine", func() bool {
		_, err = c.TryLock(ctx, "k", time.Second)
		return errors.Is(err, locking.ErrQuarantine)
	})
	if !strings.Contains(err.Error(), locking.WhyNoMarker) {
		t.Errorf("error %q does not say why", err)
	}
	if m := c.Masters(ctx)[0]; m.State != locking.MasterQuarantine || m.Why != locking.WhyNoMarker {
		t.Fatalf("restarted master: %+v, want quarantine with %q", m, locking.WhyNoMarker)
	}
}
