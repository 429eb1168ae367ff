package locking_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Each sentinel's text names it, so that a wrapped error reads as what
// happened.
func TestSentinelTextsNameThemselves(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{locking.ErrNotObtained, "locking: not obtained"},
		{locking.ErrUnavailable, "locking: unavailable"},
		{locking.ErrNotHeld, "locking: not held"},
		{locking.ErrLost, "locking: lost"},
		{locking.ErrReleased, "locking: released"},
		{locking.ErrHoldLimit, "locking: hold limit"},
		{locking.ErrClosed, "locking: client closed"},
		{locking.ErrInvalid, "locking: invalid"},
		{locking.ErrEviction, "locking: master may evict keys"},
		{locking.ErrCorrupt, "locking: corrupt"},
		{locking.ErrQuarantine, "locking: in its restart quarantine"},
		{locking.ErrMarked, "locking: not a brand-new set of masters"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("sentinel text %q, want %q", got, tc.want)
		}
	}
}

// A lease's errors after it ended, and a wait cut short, say what happened
// first, on one line, and keep errors.Is working through the wrapping.
func TestWrappedErrorsSayWhatHappened(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)

	// long enough to be obtained on a busy host (an answer that comes after
	// the validity is rightly refused), then waited out
	l, err := c.TryLock(ctx, "ended", time.Second, locking.WithAutoExtend(false))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	err = l.Release(ctx)
	if !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("release after the deadline = %v, want ErrNotHeld and ErrLost", err)
	}
	if want := `locking: not held: lost: key "ended": validity deadline passed`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("release after the deadline says %q, want it to start with %q", err, want)
	}

	held, err := c.TryLock(ctx, "busy", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Lock(wctx, "busy", time.Second)
	if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock cut short = %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("Lock cut short says %q: more than one line", err)
	}
}

// deadlineContext is a context.WithTimeout whose deadline is set late (by
// set), as a real one is: go-redis sees it (Deadline) and puts it on the
// connection, Done closes at that time, and Err says DeadlineExceeded. A
// test ends a wait at a chosen attempt with it, whatever each takes.
type deadlineContext struct {
	context.Context
	mu   sync.Mutex
	at   time.Time
	done chan struct{}
}

func (c *deadlineContext) set(d time.Duration) {
	c.mu.Lock()
	c.at = time.Now().Add(d)
	c.mu.Unlock()
	time.AfterFunc(d, func() { close(c.done) })
}
func (c *deadlineContext) Done() <-chan struct{} { return c.done }
func (c *deadlineContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, !c.at.IsZero()
}
func (c *deadlineContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// onSecondCall calls then when the second command naming key (in a Redis
// key of it) is sent, before sending it.
type onSecondCall struct {
	key   string
	then  func()
	calls atomic.Int32
}

func (h *onSecondCall) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *onSecondCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *onSecondCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.ContainsFunc(cmd.Args(), func(a any) bool { s, ok := a.(string); return ok && strings.Contains(s, h.key) }) && h.calls.Add(1) == 2 {
			h.then()
		}
		return next(ctx, cmd)
	}
}

// lockEndedAtTheSecondAttempt waits for a lock another client holds, and
// at its second attempt calls end with the wait's context (to end it) and
// the master: Lock's error.
func lockEndedAtTheSecondAttempt(t *testing.T, end func(wctx *deadlineContext, s *redistest.Server)) error {
	t.Helper()
	s := redistest.New(t)
	holder := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	held, err := holder.TryLock(ctx, "busy", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	rdb := s.TestClient(t)
	wctx := &deadlineContext{Context: ctx, done: make(chan struct{})}
	rdb.AddHook(&onSecondCall{key: "busy", then: func() { end(wctx, s) }})
	_, err = newClient(t, []*redis.Client{rdb}).Lock(wctx, "busy", time.Second)
	return err
}

// A wait that ends during an attempt says why the attempt before it did not
// get the lock (someone holds it), not that the masters are unavailable:
// the attempt cut short only ran out of the wait's time.
func TestAWaitEndedDuringAnAttemptSaysWhyTheOneBeforeFailed(t *testing.T) {
	err := lockEndedAtTheSecondAttempt(t, func(wctx *deadlineContext, _ *redistest.Server) { wctx.set(0) })
	if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("Lock cut short = %v, want ErrNotObtained and DeadlineExceeded, not ErrUnavailable", err)
	}
	var oe *locking.ObtainError
	if !errors.As(err, &oe) || oe.Key != "busy" {
		t.Fatalf("Lock cut short = %v, want the last attempt's *ObtainError", err)
	}
	if want := `locking: not obtained: the wait ended (context deadline exceeded); last attempt: not obtained: key "busy"`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Lock cut short says %q, want it to start with %q", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("Lock cut short says %q: more than one line", err)
	}
}

// A wait whose deadline (on the connection, as go-redis puts it) passes
// while a slow master has not answered the second attempt says why the
// first did not get the lock, not that the master is unavailable.
func TestAWaitWhoseDeadlinePassesDuringASlowAttemptIsNotUnavailable(t *testing.T) {
	err := lockEndedAtTheSecondAttempt(t, func(wctx *deadlineContext, s *redistest.Server) {
		wctx.set(150 * time.Millisecond)
		if err := s.Pause(); err == nil { // it answers 400 ms later
			time.AfterFunc(400*time.Millisecond, func() { _ = s.Resume() })
		}
	})
	if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("Lock cut short = %v, want ErrNotObtained and DeadlineExceeded, not ErrUnavailable", err)
	}
}
