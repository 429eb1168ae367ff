package locking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

// Lease is one holding of a lock. It ends when released, when lost (no
// extension confirmed by a quorum before its validity deadline, or a quorum no
// longer holds the key) or when its Client closes; Done is closed and Context
// is cancelled at that moment, no later than the validity deadline, which is
// earlier than the moment the key expires in Redis (by the safety margin).
type Lease struct {
	c     *Client
	keys  keys
	token string
	ttl   time.Duration
	fence int64

	ctx    context.Context
	cancel context.CancelCauseFunc

	extMu sync.Mutex // serializes extensions: their answers apply in the order they were sent
	// a key pushed out with each extension (an election's leader record),
	// to companionPX ms; guarded by extMu
	companion   string
	companionPX int64

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	err      error // end reason; nil while held
	capped   bool  // auto-extension stopped at its cap
	lastErr  error // last failed extension, for the loss reason

	// auto-extension
	maxHold  time.Duration
	maxExt   int
	acquired time.Time     // set when auto-extended: the hold caps count from it
	done     chan struct{} // closed when the extender exits
}

func (c *Client) newLease(k keys, token string, ttl time.Duration, fence int64, deadline time.Time, auto bool, o *lockOptions) *Lease {
	l := &Lease{c: c, keys: k, token: token, ttl: ttl, fence: fence, deadline: deadline,
		maxHold: o.maxHold, maxExt: o.maxExtensions}
	c.stats.acquired.Add(1)
	if auto {
		l.acquired = time.Now()
		l.Context() // the extender watches it
		l.done = make(chan struct{})
		if !c.g.Spawn(l.extender) {
			close(l.done)
			l.mu.Lock()
			l.end(ErrClosed)
			l.mu.Unlock()
		}
	}
	return l
}

// Context returns a context cancelled when the lease ends; context.Cause gives
// the reason (the same as Err). The context and its deadline timer are made
// on first use, so a lease nobody watches costs no timer.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.err != nil {
			l.cancel(l.err)
		} else {
			l.timer = time.AfterFunc(time.Until(l.deadline), l.onDeadline)
		}
	}
	return l.ctx
}

// Key returns the lock's name.
func (l *Lease) Key() string { return l.keys.name }

// Token returns the holder's random token (128 bits, base64url).
func (l *Lease) Token() string { return l.token }

// Fence returns the fencing token: it strictly increases across successive
// holders of the same lock. Pass it to storage that can reject writes carrying
// a smaller fence than one it has seen.
func (l *Lease) Fence() int64 { return l.fence }

// TTL returns the ttl the lease was taken with, or of its last extension.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline returns the current validity deadline (local monotonic clock). The
// lease ends then at the latest unless an extension moves it.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel closed when the lease ends.
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, and then why it ended: ErrReleased,
// an error wrapping ErrLost or ErrHoldLimit, or ErrClosed.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked()
	return l.err
}

// end finishes the lease once; the first reason wins. Callers hold l.mu.
func (l *Lease) end(err error) bool {
	if l.err != nil {
		return false
	}
	l.err = err
	if errors.Is(err, ErrLost) {
		l.c.stats.lost.Add(1)
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.cancel != nil {
		l.cancel(err)
	}
	return true
}

func (l *Lease) onDeadline() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 { // moved by an extension meanwhile
		l.timer.Reset(d)
		return
	}
	l.expireLocked()
}

// expireLocked ends the lease if its deadline has passed, and then releases
// the key (token-checked, best effort): it may still be this lease's in
// Redis for the safety margin, or longer when only the extensions' answers
// were lost, and a waiter should not wait for it. Callers hold l.mu.
func (l *Lease) expireLocked() {
	if l.err != nil || time.Now().Before(l.deadline) {
		return
	}
	ttl := l.ttl
	defer l.c.g.Spawn(func() {
		ctx, cancel := context.WithTimeout(l.c.ctx, l.c.masterTimeout(ttl))
		defer cancel()
		l.c.releaseOn(ctx, l.keys, l.token, ttl)
	})
	switch {
	case l.capped:
		l.end(fmt.Errorf("%w: key %q held for %v", ErrHoldLimit, l.keys.name, time.Since(l.acquired).Round(time.Millisecond)))
	case l.lastErr != nil:
		l.end(fmt.Errorf("%w: key %q: validity deadline passed, last extension failed: %w", ErrLost, l.keys.name, l.lastErr))
	default:
		l.end(fmt.Errorf("%w: key %q: validity deadline passed without extension", ErrLost, l.keys.name))
	}
}

// Extend asks every master to push the key's expiry to ttl from now. On
// success the validity deadline becomes (send time + ttl - margin). When a
// quorum of masters no longer holds the key the lease ends, is released
// everywhere, and Extend returns an error wrapping ErrNotHeld and ErrLost.
// Other failures (masters unreachable) leave the lease as it was: it ends at
// its deadline unless a later extension succeeds. A reply that arrives after
// the lease ended never revives it. Extensions of one lease (concurrent calls,
// or a call racing auto-extension) run one at a time, in order, so the
// deadline always comes from the extension that ran last.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < MinTTL || ttl%time.Millisecond != 0 {
		return fmt.Errorf("%w: extension ttl %v for key %q (minimum %v, whole milliseconds)", ErrInvalid, ttl, l.keys.name, MinTTL)
	}
	if ttl > l.c.opts.quarantine {
		return fmt.Errorf("%w: extension ttl %v for key %q is longer than the restart quarantine %v", ErrInvalid, ttl, l.keys.name, l.c.opts.quarantine)
	}
	l.extMu.Lock()
	defer l.extMu.Unlock()
	if err := l.Err(); err != nil {
		return under(ErrNotHeld, err)
	}
	c := l.c
	start := time.Now()
	s := c.scripts.extend
	if l.keys.kind.share() {
		s = c.scripts.extendShare
	}
	var line []any
	if l.companion != "" {
		line = s.Line([]string{l.keys.lock, l.companion}, l.token, ttl.Milliseconds(), l.companionPX)
	} else {
		line = s.Line([]string{l.keys.lock}, l.token, ttl.Milliseconds())
	}
	// With several masters it returns once a quorum confirmed: a slow
	// master's answer must not outlast the deadline a quorum already moved.
	// The slow master's call still runs, in order after the earlier calls of
	// this lease there, and the caller's ctx does not cut it short once
	// Extend returned (the extender cancels its ctx at once): a key extended
	// only on the fastest quorum would drift off the others, and a lease
	// would then survive fewer master failures than the quorum promises. So
	// those calls are bounded by the master timeout only; the lease still
	// ends at its deadline by its own timer. One master's call runs inline,
	// bounded by ctx.
	fctx := ctx
	if len(c.masters) > 1 {
		fctx = context.WithoutCancel(ctx)
	}
	rs := c.fan(fctx, ttl, s, line, parseInt, isOne)
	acks, gone, errs := tally(rs)

	l.mu.Lock()
	if l.err != nil { // ended while we waited: a late reply changes nothing
		err := l.err
		l.mu.Unlock()
		return under(ErrNotHeld, err)
	}
	if time.Now().After(l.deadline) {
		// the reply came after the deadline: the lease is over even if the
		// deadline timer has not run yet
		err := fmt.Errorf("%w: key %q: extension confirmed only after the validity deadline", ErrLost, l.keys.name)
		c.stats.extendFailed.Add(1)
		l.end(err)
		l.mu.Unlock()
		c.releaseOn(ctx, l.keys, l.token, ttl)
		return under(ErrNotHeld, err)
	}
	if acks >= c.quorum {
		c.stats.extended.Add(1)
		l.ttl = ttl
		l.deadline = start.Add(ttl - c.margin(ttl))
		l.lastErr = nil
		if l.timer != nil {
			l.timer.Reset(time.Until(l.deadline))
		}
		l.mu.Unlock()
		return nil
	}
	if gone > len(c.masters)-c.quorum { // a quorum can no longer be had
		err := fmt.Errorf("%w: key %q is held by this lease on %d masters only, %d needed", ErrLost, l.keys.name, acks, c.quorum)
		c.stats.extendFailed.Add(1)
		l.end(err)
		l.mu.Unlock()
		c.releaseOn(ctx, l.keys, l.token, ttl)
		return under(ErrNotHeld, err)
	}
	err := fmt.Errorf("%w: extending %q: confirmed by %d masters, %d needed", ErrUnavailable, l.keys.name, acks, c.quorum)
	if len(errs) > 0 {
		err = fmt.Errorf("%w: %w", err, joinErrs(errs))
	}
	c.stats.extendFailed.Add(1)
	l.lastErr = err
	l.mu.Unlock()
	return err
}

// keepWith makes every later extension push key's expiry out to px ms too
// (the key must share the lock key's hash tag).
func (l *Lease) keepWith(key string, px int64) {
	l.extMu.Lock()
	l.companion, l.companionPX = key, px
	l.extMu.Unlock()
}

// Release ends the lease and deletes the key on every master where this
// lease's token still holds it (or hands it to the next fair waiter). The
// lease's context is cancelled before the key is freed. Releasing a lease
// that already ended returns an error wrapping ErrNotHeld and the reason it
// ended (ErrLost: the caller learns it had lost the lock). When the key was
// found no longer held by this lease on enough masters that a quorum cannot
// have held it (it expired, was evicted, or a master restarted), Release
// returns an error wrapping ErrNotHeld and ErrLost: the caller learns it may
// not have held the lock to the end. A release that go-redis may have sent twice
// (a connection to the master failed during the call: its answer may have
// been lost and the command retried) counts as this lease's own; one that
// merely ran while the pool dialed another connection does not. Other failures wrap
// ErrUnavailable (the key expires at its ttl where it was not released).
func (l *Lease) Release(ctx context.Context) error {
	ttl, err := l.beginRelease(true)
	if err != nil {
		return err
	}
	return l.settleRelease(l.c.releaseOn(ctx, l.keys, l.token, ttl))
}

// ReleaseIn is Release for a caller that writes to the lock's master in one
// round trip with its own commands (a run's end record and its lease's
// release, say): it ends the lease at once and queues the release's script
// call on p, a pipeline to the client's only master, and returns what
// finishes the release once the caller has sent p. A release the pipeline
// did not land (its round trip failed, or the server did not hold the
// script), that found the key not held by this lease, or that went to a
// Redis other than the master is sent again, as Release sends it, on the
// client's own connections: a misdirected pipeline costs a round trip and
// never leaves the key held. ctx bounds that second send, not p's round
// trip, and ReleaseIn does not wait for an extension under way (one that
// lands after the release finds the key gone, token-checked). On a Redis
// Cluster a pipeline's commands to different nodes go in parallel: the
// release keeps its place after the caller's writes only on one node. With
// several masters nothing is queued on p and finish releases as Release
// does. finish returns what Release returns, except that a release p's
// client sent twice (its first answer lost) may be reported as not held;
// called more than once, it releases once.
func (l *Lease) ReleaseIn(ctx context.Context, p redis.Pipeliner) (finish func() error) {
	// no wait for an extension under way: the caller's round trip is not
	// held up by it, and the extension, token-checked, cannot keep or
	// revive a key the release deleted
	ttl, err := l.beginRelease(false)
	if err != nil {
		return func() error { return err }
	}
	var cmd *redis.Cmd
	if len(l.c.masters) == 1 {
		s, line := l.c.releaseLine(l.keys, l.token)
		cmd = p.EvalSha(ctx, s.Hash(), line.keys, line.args...)
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			if cmd != nil {
				if v, cerr := cmd.Int64(); cerr == nil && v == 1 {
					err = nil
					return
				}
			}
			err = l.settleRelease(l.c.releaseOn(ctx, l.keys, l.token, ttl))
		})
		return err
	}
}

// beginRelease ends the lease for a release (its context is cancelled) and
// returns the ttl its release is bounded by, after the extender stopped when
// wait says so; a lease that ended already returns an error wrapping
// ErrNotHeld and why it ended.
func (l *Lease) beginRelease(wait bool) (time.Duration, error) {
	l.mu.Lock()
	l.expireLocked()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return 0, under(ErrNotHeld, err)
	}
	l.end(ErrReleased)
	ttl := l.ttl
	l.mu.Unlock()
	if wait && l.done != nil {
		<-l.done
		ttl = l.TTL() // the extender may have changed it
	}
	return ttl, nil
}

// settleRelease is Release's answer from the masters' replies rs.
func (l *Lease) settleRelease(rs []quorum.Reply) error {
	released, notHeld := 0, 0
	var errs []error
	for _, r := range rs {
		switch {
		case r.Err != nil:
			errs = append(errs, masterErr(r))
		case r.Val.(int64) == 1 || r.Resent:
			// a 0 from a call go-redis may have sent twice (a connection
			// failed under it) is our own earlier release answering again:
			// the same server process (Trust checked it) cannot have
			// dropped the key before its expiry, which our deadline
			// precedes
			released++
		default:
			notHeld++
		}
	}
	switch {
	case released >= l.c.quorum:
		return nil
	case notHeld > len(l.c.masters)-l.c.quorum:
		return under(ErrNotHeld, fmt.Errorf("%w: key %q was no longer held by this lease on %d of %d masters (expired, evicted, or the master restarted)", ErrLost, l.keys.name, notHeld, len(l.c.masters)))
	default:
		return fmt.Errorf("%w: releasing %q: released on %d masters, %d needed (the rest expire at the ttl): %w", ErrUnavailable, l.keys.name, released, l.c.quorum, joinErrs(errs))
	}
}

// extender keeps the lease alive: an extension every ttl/3, a failed one
// retried at once and then every ttl/10, until the lease ends or a cap is hit.
func (l *Lease) extender() {
	defer close(l.done)
	n := 0
	next := l.TTL() / 3
	retried := false
	for {
		t := time.NewTimer(next)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-l.c.ctx.Done():
			t.Stop()
			l.mu.Lock()
			l.end(ErrClosed)
			l.mu.Unlock()
			return
		case <-t.C:
		}
		if (l.maxExt > 0 && n >= l.maxExt) || (l.maxHold > 0 && time.Since(l.acquired) >= l.maxHold) {
			l.mu.Lock()
			l.capped = true
			l.mu.Unlock()
			select {
			case <-l.ctx.Done():
			case <-l.c.ctx.Done():
				l.mu.Lock()
				l.end(ErrClosed)
				l.mu.Unlock()
			}
			return
		}
		l.mu.Lock()
		ttl, remaining := l.ttl, time.Until(l.deadline)
		l.mu.Unlock()
		if remaining <= 0 {
			remaining = time.Millisecond
		}
		ctx, cancel := context.WithTimeout(l.ctx, remaining)
		err := l.Extend(ctx, ttl)
		cancel()
		switch {
		case err == nil:
			n++
			next, retried = ttl/3, false
		case errors.Is(err, ErrNotHeld):
			return
		case !retried:
			next, retried = 0, true
		default:
			next = ttl / 10
		}
	}
}
