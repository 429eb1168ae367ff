// Package clock is the time source baton's packages read, injected so that
// tests run on a Fake clock instead of sleeping.
package clock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Clock is a source of time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d
	// has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer baton uses. As with time.Timer
// since Go 1.23, no stale value is received from C after Stop or Reset
// returns.
type Timer interface {
	// C returns the channel on which the timer delivers its time.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the timer
	// was active (stopped before it fired).
	Stop() bool
	// Reset makes the timer fire d from now. It reports whether the timer
	// was active.
	Reset(d time.Duration) bool
}

// Real returns the Clock backed by package time.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// BlockUntilTimeout bounds how long Fake.BlockUntil waits.
const BlockUntilTimeout = 10 * time.Second

// Fake is a simulated Clock for tests: time stands still until Advance or
// Set moves it, and then the timers that have come due fire, in order of their
// deadlines. Each sends its deadline. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer  // active (waiting) timers
	changed chan struct{} // closed and replaced whenever timers change
}

// NewFake returns a Fake that reads t until it is moved.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

// Now returns the simulated time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; with
// d <= 0 it fires at once.
func (c *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.schedule(t, d)
	return t
}

// Advance moves the clock forward by d and fires the timers that come due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t, forward or backward, and fires the timers that
// come due. Moving it backward fires nothing: timers keep their deadlines.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// Waiters returns the number of timers waiting to fire.
func (c *Fake) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Waiting reports whether a timer waits to fire at exactly t.
func (c *Fake) Waiting(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ft := range c.timers {
		if ft.when.Equal(t) {
			return true
		}
	}
	return false
}

// Next returns how long from now the earliest waiting timer fires, and
// false when none waits.
func (c *Fake) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return 0, false
	}
	first := c.timers[0].when
	for _, t := range c.timers[1:] {
		if t.when.Before(first) {
			first = t.when
		}
	}
	return first.Sub(c.now), true
}

// BlockUntil waits until at least n timers are waiting to fire, so a test can
// move the clock only once the code under test waits on it. It gives up after
// BlockUntilTimeout of real time with an error.
func (c *Fake) BlockUntil(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), BlockUntilTimeout)
	defer cancel()
	return c.BlockUntilContext(ctx, n)
}

// BlockUntilContext waits until at least n timers are waiting to fire or ctx
// is done, in which case it returns an error that wraps ctx.Err().
func (c *Fake) BlockUntilContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("clock: fake clock: %d of %d timers waiting: %w", have, n, ctx.Err())
		}
	}
}

// setLocked moves the clock to now and fires the due timers. c.mu is held.
func (c *Fake) setLocked(now time.Time) {
	c.now = now
	slices.SortStableFunc(c.timers, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	fired := 0
	for _, t := range c.timers {
		if t.when.After(now) {
			break
		}
		t.fire()
		fired++
	}
	if fired > 0 {
		c.timers = slices.Delete(c.timers, 0, fired)
		c.notifyLocked()
	}
}

// schedule arms t to fire d from now. c.mu is held and t is not active.
func (c *Fake) schedule(t *fakeTimer, d time.Duration) {
	t.when = c.now.Add(d)
	if d <= 0 {
		t.fire()
		return
	}
	c.timers = append(c.timers, t)
	c.notifyLocked()
}

// unschedule removes t if it is active and reports whether it was. c.mu is
// held.
func (c *Fake) unschedule(t *fakeTimer) bool {
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	c.notifyLocked()
	return true
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type fakeTimer struct {
	clock *Fake
	ch    chan time.Time // capacity 1
	when  time.Time      // guarded by clock.mu
}

// fire delivers the deadline. clock.mu is held.
func (t *fakeTimer) fire() {
	select {
	case t.ch <- t.when:
	default: // an undrained value is pending; like time.Timer, keep one
	}
}

// drain drops a delivered but unreceived value, so none is stale after
// Stop or Reset. clock.mu is held.
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	active := t.clock.unschedule(t)
	t.drain()
	return active
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	active := t.clock.unschedule(t)
	t.drain()
	t.clock.schedule(t, d)
	return active
}

// WithTimeoutCause is context.WithTimeoutCause on c: the context ends with
// cause once c has gone d further (at once for d <= 0), or when ctx ends.
func WithTimeoutCause(ctx context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		cancel(cause)
		return wctx, func() {}
	}
	t := c.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(cause)
		case <-wctx.Done(): // ctx ended, or the returned cancel was called
		}
	}()
	// as a context.CancelFunc: later calls do nothing
	return wctx, func() { cancel(context.Canceled) }
}

// Every calls f every d on c until done is closed.
func Every(done <-chan struct{}, c Clock, d time.Duration, f func()) {
	t := c.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			f()
			t.Reset(d)
		}
	}
}
