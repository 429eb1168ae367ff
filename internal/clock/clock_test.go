package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeClockTimerFiresOnAdvance(t *testing.T) {
	c := NewFake(epoch)
	tm := c.NewTimer(10 * time.Second)
	c.Advance(9 * time.Second)
	if v, ok := received(tm.C()); ok {
		t.Fatalf("fired early with %v", v)
	}
	c.Advance(time.Second)
	if v, ok := received(tm.C()); !ok || !v.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("got %v, %v; want the deadline", v, ok)
	}
	if !c.Now().Equal(epoch.Add(10 * time.Second)) {
		t.Fatalf("Now = %v", c.Now())
	}
	if tm.Stop() {
		t.Fatal("Stop after firing reported active")
	}
}

func TestFakeClockOrderAndDeadlines(t *testing.T) {
	c := NewFake(epoch)
	late, early := c.NewTimer(3*time.Minute), c.NewTimer(time.Minute)
	never := c.NewTimer(time.Hour)
	c.Advance(5 * time.Minute)
	for _, tc := range []struct {
		tm   Timer
		want time.Duration
	}{{early, time.Minute}, {late, 3 * time.Minute}} {
		if v, ok := received(tc.tm.C()); !ok || !v.Equal(epoch.Add(tc.want)) {
			t.Fatalf("timer of %v: got %v, %v", tc.want, v, ok)
		}
	}
	if _, ok := received(never.C()); ok {
		t.Fatal("1h timer fired after 5m")
	}
	if n := c.Waiters(); n != 1 {
		t.Fatalf("%d waiters, want 1", n)
	}
}

func TestFakeClockStopReset(t *testing.T) {
	c := NewFake(epoch)
	tm := c.NewTimer(time.Minute)
	if !tm.Stop() {
		t.Fatal("Stop of a waiting timer reported inactive")
	}
	c.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("stopped timer fired")
	}
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a stopped timer reported active")
	}
	if !tm.Reset(2 * time.Minute) {
		t.Fatal("Reset of a waiting timer reported inactive")
	}
	c.Advance(time.Minute)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired at the deadline it was reset away from")
	}
	c.Advance(time.Minute)
	// Fired but not received: Reset drops the stale value.
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a fired timer reported active")
	}
	if _, ok := received(tm.C()); ok {
		t.Fatal("stale value after Reset")
	}
	c.Advance(time.Minute)
	if v, ok := received(tm.C()); !ok || !v.Equal(epoch.Add(time.Hour+3*time.Minute)) {
		t.Fatalf("after Reset: %v, %v", v, ok)
	}
}

func TestFakeClockSet(t *testing.T) {
	c := NewFake(epoch)
	tm := c.NewTimer(time.Minute)
	c.Set(epoch.Add(-time.Hour)) // backward: nothing fires
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired when the clock went back")
	}
	c.Set(epoch.Add(time.Minute))
	if _, ok := received(tm.C()); !ok {
		t.Fatal("did not fire at its deadline")
	}
	if _, ok := received(c.NewTimer(0).C()); !ok {
		t.Fatal("NewTimer(0) did not fire at once")
	}
}

func TestFakeClockBlockUntil(t *testing.T) {
	c := NewFake(epoch)
	done := make(chan time.Time)
	go func() {
		tm := c.NewTimer(30 * time.Second)
		done <- <-tm.C()
	}()
	if err := c.BlockUntil(1); err != nil {
		t.Fatal(err)
	}
	c.Advance(30 * time.Second)
	if v := <-done; !v.Equal(epoch.Add(30 * time.Second)) {
		t.Fatalf("got %v", v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntilContext(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("BlockUntilContext with a done context: %v", err)
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("Now %v before %v", now, before)
	}
	tm := c.NewTimer(0)
	if v := <-tm.C(); v.Before(before) {
		t.Fatalf("timer sent %v", v)
	}
	if tm.Reset(time.Hour) {
		t.Fatal("Reset of a fired timer reported active")
	}
	if !tm.Stop() {
		t.Fatal("Stop of a waiting timer reported inactive")
	}
}

var errBound = errors.New("bound passed")

// WithTimeoutCause ends its context with the cause once the clock has gone
// d further, and its timer is gone: nothing waits on the clock after.
func TestWithTimeoutCauseEndsWithItsCauseOnTheClock(t *testing.T) {
	c := NewFake(epoch)
	ctx, cancel := WithTimeoutCause(context.Background(), c, time.Minute, errBound)
	defer cancel()
	if err := c.BlockUntil(1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute - time.Nanosecond)
	if ctx.Err() != nil {
		t.Fatal("ended early")
	}
	c.Advance(time.Nanosecond)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errBound) {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	waitNoTimers(t, c)
}

// Its cancel, as a context.CancelFunc, may be called more than once (after
// the first call, later ones do nothing), and ends the wait on the clock.
func TestWithTimeoutCauseCancelIsIdempotent(t *testing.T) {
	c := NewFake(epoch)
	ctx, cancel := WithTimeoutCause(context.Background(), c, time.Minute, errBound)
	cancel()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("a second cancel panicked: %v", r)
		}
	}()
	cancel()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	waitNoTimers(t, c)
}

// A bound of 0 or less ends the context at once with the cause; a parent
// that ends first ends it with the parent's cause, and the timer goes.
func TestWithTimeoutCauseAtOnceAndParentFirst(t *testing.T) {
	c := NewFake(epoch)
	ctx, cancel := WithTimeoutCause(context.Background(), c, 0, errBound)
	if !errors.Is(context.Cause(ctx), errBound) {
		t.Errorf("d=0: cause %v", context.Cause(ctx))
	}
	cancel()
	cancel()
	errParent := errors.New("parent")
	parent, end := context.WithCancelCause(context.Background())
	ctx, cancel = WithTimeoutCause(parent, c, time.Minute, errBound)
	defer cancel()
	end(errParent)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errParent) {
		t.Errorf("parent first: cause %v", context.Cause(ctx))
	}
	waitNoTimers(t, c)
}

func waitNoTimers(t *testing.T, c *Fake) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.Waiters() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers still wait", c.Waiters())
		}
	}
}
