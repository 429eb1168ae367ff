package locking

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

func newToken() string {
	var b [16]byte // 128 bits
	var t [22]byte // base64url without padding
	_, _ = rand.Read(b[:])
	base64.RawURLEncoding.Encode(t[:], b[:])
	return string(t[:])
}

func (c *Client) validate(k keys, ttl time.Duration, o *lockOptions) error {
	key := k.name
	if key == "" {
		return fmt.Errorf("%w: empty lock key", ErrInvalid)
	}
	if ttl < MinTTL || ttl <= 2*c.margin(ttl) {
		return fmt.Errorf("%w: ttl %v for key %q is too short (minimum %v and more than twice the safety margin %v)", ErrInvalid, ttl, key, MinTTL, c.margin(ttl))
	}
	if ttl%time.Millisecond != 0 {
		return fmt.Errorf("%w: ttl %v for key %q is not a whole number of milliseconds", ErrInvalid, ttl, key)
	}
	if ttl > c.opts.quarantine {
		return fmt.Errorf("%w: ttl %v for key %q is longer than the restart quarantine %v: a restarted master could grant it while it is still held (raise WithRestartQuarantine)", ErrInvalid, ttl, key, c.opts.quarantine)
	}
	if o.fair && k.kind != kindLock {
		return fmt.Errorf("%w: fair mode for %q: only a mutex takes WithFair (a fair semaphore is FairSemaphore)", ErrInvalid, key)
	}
	if o.fair && len(c.masters) > 1 {
		return fmt.Errorf("%w: fair mode for key %q needs a single master (have %d)", ErrInvalid, key, len(c.masters))
	}
	if o.maxHold < 0 || o.maxExtensions < 0 {
		return fmt.Errorf("%w: negative hold cap for key %q", ErrInvalid, key)
	}
	if c.closed() {
		return ErrClosed
	}
	return nil
}

// TryLock makes one attempt to take the lock named key for ttl. It returns a
// Lease, or an *ObtainError that wraps ErrNotObtained when the lock is taken
// and ErrUnavailable when too few masters answered. The lease is
// auto-extended as Lock's is, until Release, loss or Close; with
// WithAutoExtend(false) it ends at its validity deadline, a little before
// the key expires in Redis. With WithFair it does not take a free key while
// fair waiters queue for it.
//
// Cancelling ctx abandons the attempt; whatever was taken is released.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return c.tryLock(ctx, c.keysFor(key), ttl, opts)
}

func (c *Client) tryLock(ctx context.Context, k keys, ttl time.Duration, opts []LockOption) (*Lease, error) {
	var o lockOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := c.validate(k, ttl, &o); err != nil {
		return nil, err
	}
	l, _, err := c.attempt(ctx, k, newToken(), ttl, false, &o, o.auto())
	return l, err
}

// Lock takes the lock named key for ttl, waiting while someone else holds it.
// A waiter is woken as soon as the holder releases (no polling), and re-checks
// at the holder's remaining ttl in case the holder died. Auto-extension is on
// unless WithAutoExtend(false) is given.
//
// Cancelling ctx ends the wait: Lock then returns an error joining
// ErrNotObtained and ctx.Err(). ctx bounds only the wait; the lease lives on
// until Release, loss or Close. Errors that waiting cannot cure (masters down,
// bad arguments) return at once. Whichever way Lock returns without a lease,
// it has left the lock's wait queues (so a fair queue never keeps a ghost at
// its head), also when Close ends the wait.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return c.lock(ctx, c.keysFor(key), ttl, opts)
}

func (c *Client) lock(ctx context.Context, k keys, ttl time.Duration, opts []LockOption) (*Lease, error) {
	return c.lockAny(ctx, []keys{k}, ttl, opts)
}

// lockAny takes whichever of ks frees first (one lease), waiting as Lock
// does: one token for every key, one waiter woken by a release of any of
// them. A semaphore's slots are its keys; a lock is one key.
func (c *Client) lockAny(ctx context.Context, ks []keys, ttl time.Duration, opts []LockOption) (*Lease, error) {
	var o lockOptions
	for _, opt := range opts {
		opt(&o)
	}
	for _, k := range ks {
		if err := c.validate(k, ttl, &o); err != nil {
			return nil, err
		}
	}
	if !c.calls.Enter() {
		return nil, ErrClosed
	}
	defer c.calls.Leave()
	token := newToken()
	start := time.Now()
	c.hub.ensure(ctx, c.masterTimeout(ttl))
	var nbuf [1]string
	names := nbuf[:0]
	for _, k := range ks {
		names = append(names, k.name)
	}
	w := c.hub.add(token, names)
	l, queued, err := c.wait(ctx, ks, token, ttl, &o, w)
	if l != nil {
		c.stats.waited.Add(int64(time.Since(start)))
	}
	c.hub.remove(w, l == nil)
	for i, k := range ks {
		// the keys a waiter queued on and did not get; one of them may have
		// been handed over, or granted by an answer that came too late
		if queued[i] && (l == nil || l.keys.lock != k.lock) {
			c.giveUp(k, token, ttl)
		}
	}
	return l, err
}

// wait makes attempts on ks until one succeeds, ctx ends, the client
// closes or an attempt fails in a way waiting cannot cure. A round tries
// every key (from a random one); after a wake-up by a release of one of
// several keys, only that key is tried (the others were busy, and their
// releases wake the waiter too) until the earliest re-check a full round
// asked for. queued[i] reports whether some attempt on ks[i] may have
// entered its wait queues (a master answered busy, or did not answer).
func (c *Client) wait(ctx context.Context, ks []keys, token string, ttl time.Duration, o *lockOptions, w *waiter) (l *Lease, queued []bool, err error) {
	queued = make([]bool, len(ks))
	first, n := 0, len(ks)
	if len(ks) > 1 {
		first = mrand.IntN(len(ks))
	}
	var recheck time.Time
	for {
		if n == len(ks) {
			recheck = time.Time{}
		}
		for j := range n {
			i := (first + j) % len(ks)
			l, r, e := c.attempt(ctx, ks[i], token, ttl, true, o, o.auto())
			if l != nil {
				return l, queued, nil
			}
			var oe *ObtainError
			if errors.As(e, &oe) {
				queued[i] = queued[i] || oe.mayQueue()
			}
			if ctx.Err() != nil && err != nil && cutShort(e, ctx) {
				// cut short by the wait's end, the attempt says only that
				// its masters did not answer in time (which would read as
				// unavailable): the attempt before it says why the lock
				// was not had
				return nil, queued, waitEnded(err, ctx)
			}
			err = e
			switch {
			case ctx.Err() != nil:
				return nil, queued, waitEnded(err, ctx)
			case c.closed():
				return nil, queued, ErrClosed
			case oe == nil || !oe.contended():
				return nil, queued, err
			}
			if at := time.Now().Add(r); recheck.IsZero() || at.Before(recheck) {
				recheck = at
			}
		}
		timer := time.NewTimer(time.Until(recheck))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, queued, waitEnded(err, ctx)
		case <-c.ctx.Done():
			timer.Stop()
			return nil, queued, ErrClosed
		case <-w.ch:
			timer.Stop()
			if len(ks) > 1 { // try the key just released
				first, n = c.hub.wokeBy(w), 1
			}
		case <-timer.C:
			n = len(ks)
		}
	}
}

// cutShort reports whether attempt error e, after ctx ended, is ctx's end:
// its error, or the deadline go-redis put on a connection from ctx's.
func cutShort(e error, ctx context.Context) bool {
	return errors.Is(e, ctx.Err()) || errors.Is(e, os.ErrDeadlineExceeded)
}

// waitEnded is Lock's error when ctx ends the wait: not obtained, why the last
// attempt failed, and the context's error.
func waitEnded(last error, ctx context.Context) error {
	if last == nil {
		return fmt.Errorf("%w: the wait ended: %w", ErrNotObtained, ctx.Err())
	}
	return fmt.Errorf("%w: the wait ended (%w); last attempt: %w", ErrNotObtained, ctx.Err(), bare(last))
}

// giveUp takes a waiter that got no lease out of the queues; if a release
// had already handed the key to it, the key is released on (handed to the
// next waiter). Bounded by the master timeout, also after Close.
func (c *Client) giveUp(k keys, token string, ttl time.Duration) {
	var rs []quorum.Reply
	if c.closed() {
		rs = c.direct(ttl, c.scripts.leave, []string{k.lock}, token, c.wakeArg, k.name)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.masterTimeout(ttl))
		defer cancel()
		rs = c.fan(ctx, ttl, c.scripts.leave, c.scripts.leave.Line([]string{k.lock}, token, c.wakeArg, k.name), parseInt, nil)
	}
	for _, r := range rs {
		if v, ok := r.Val.(int64); ok && r.Err == nil && v == 1 {
			c.releaseOn(context.Background(), k, token, ttl)
			return
		}
	}
}

// Hold takes the lock named key (waiting like Lock), keeps it alive, runs fn
// under a context that ends when the lease is lost or ctx ends, and releases
// the lock with the token check. It returns fn's error joined with any lock
// error: a failed acquisition (fn does not run), the loss of the lease while fn
// ran (wrapping ErrLost), or a failed release.
func (c *Client) Hold(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...LockOption) error {
	l, err := c.Lock(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	fnErr := fn(runCtx)
	stop()
	cancel(nil)

	lost := l.Err() // non-nil only when lost (or the client closed) before release
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), c.masterTimeout(ttl))
	defer relCancel()
	relErr := l.Release(relCtx)
	if lost != nil {
		return errors.Join(fnErr, fmt.Errorf("locking: lease on %q ended while held: %w", key, bare(lost)))
	}
	return errors.Join(fnErr, relErr)
}

// attempt runs the acquire script on all masters. On success it returns the
// lease; otherwise the error and how long to wait before trying again. A
// caller that will wait registers as a waiter (its token is its id).
func (c *Client) attempt(ctx context.Context, k keys, token string, ttl time.Duration, waits bool, o *lockOptions, auto bool) (*Lease, time.Duration, error) {
	waiter := ""
	if waits {
		waiter = token
	}
	s, line := c.acquireLine(k, token, ttl, waiter, o.fair)
	start := time.Now()
	rs := c.fan(ctx, ttl, s, line, parseAcquire, granted)

	var oe ObtainError // copied out on failure: success allocates none
	var fbuf [8]int64
	fences := fbuf[:0]
	var waitFor []time.Duration
	corrupt := false
	for _, r := range rs {
		if errors.Is(r.Err, quorum.ErrPending) {
			continue
		}
		if r.Err != nil {
			oe.Failures = append(oe.Failures, MasterError{r.M.Idx, r.M.Addr, r.Err})
			corrupt = corrupt || errors.Is(r.Err, ErrCorrupt)
			var q *quorum.QuarantineError
			switch {
			case errors.As(r.Err, &q):
				waitFor = append(waitFor, q.Left)
			case errors.Is(r.Err, quorum.ErrRestarted):
				waitFor = append(waitFor, 50*time.Millisecond)
			}
			continue
		}
		code, n, _ := acquireAnswer(r.Val)
		switch code {
		case 1:
			fences = append(fences, n)
			continue
		case 0:
			oe.Failures = append(oe.Failures, MasterError{r.M.Idx, r.M.Addr, errBusy})
		default: // -1: the marker went missing under a running server
			r.M.Invalidate()
			oe.Failures = append(oe.Failures, MasterError{r.M.Idx, r.M.Addr, quorum.ErrRestarted})
			n = 50
		}
		waitFor = append(waitFor, time.Duration(n)*time.Millisecond)
	}
	oe.Granted = len(fences)

	// the earliest moment a quorum could be free: the holder's remaining ttl on
	// the master that frees up last among the first quorum-minus-granted ones
	retry := c.retryAfter(waitFor, c.quorum-len(fences))

	// a corrupt counter on any master that answered fails the attempt
	// whatever the others granted: its fence is unknown, and the largest
	// over a majority is the fence (see ErrCorrupt)
	if len(fences) < c.quorum || corrupt {
		if len(fences) > 0 || timedOut(rs) {
			// undo what was granted, and what a late answer may still grant
			c.releaseOn(ctx, k, token, ttl)
		}
		e := oe
		e.Key, e.Quorum = k.name, c.quorum
		return nil, retry, &e
	}

	fence, ok := agreed(fences, c.quorum)
	if !ok {
		var err error
		if fence, err = c.syncFence(ctx, k, token, ttl, fences); err != nil {
			c.releaseOn(ctx, k, token, ttl)
			e := oe
			e.Key, e.Quorum, e.Fence = k.name, c.quorum, err
			return nil, retry, &e
		}
	}
	validity := ttl - time.Since(start) - c.margin(ttl)
	if validity <= 0 {
		c.releaseOn(ctx, k, token, ttl)
		e := oe
		e.Key, e.Quorum, e.Expired = k.name, c.quorum, true
		return nil, 0, &e
	}
	return c.newLease(k, token, ttl, fence, start.Add(ttl-c.margin(ttl)), auto, o), 0, nil
}

// acquireLine is the acquire command line of k's kind, one shared by every
// master.
func (c *Client) acquireLine(k keys, token string, ttl time.Duration, waiter string, fair bool) (*quorum.Script, []any) {
	ttlMs := ttl.Milliseconds()
	// a waiter's entry outlives the wait it is told by this much; the waits
	// of fair waiters and of read/write and fair semaphore waiters are at
	// most their ttl, so a place in a queue or an intent that blocks others
	// lapses within ttl + 1s of its waiter's death
	slack := int64(1000)
	if k.kind == kindLock && !fair {
		slack += ttlMs // an entry that only asks for a wake-up may linger
	}
	ks := []string{k.lock, k.fence, c.g.MarkerKey()}
	if c.mode == "u" {
		ks = ks[:2]
	}
	switch k.kind {
	case kindRead:
		return c.scripts.rwAcquire, c.scripts.rwAcquire.Line(ks, token, ttlMs, c.mode, waiter, slack, "r")
	case kindWrite:
		return c.scripts.rwAcquire, c.scripts.rwAcquire.Line(ks, token, ttlMs, c.mode, waiter, slack, "w")
	case kindSlot:
		return c.scripts.semAcquire, c.scripts.semAcquire.Line(ks, token, ttlMs, c.mode, waiter, slack, k.limit, c.wakeArg, k.name)
	}
	f := ""
	if fair {
		f = "f"
	}
	return c.scripts.acquire, c.scripts.acquire.Line(ks, token, ttlMs, c.mode, waiter, slack, f)
}

// timedOut tells whether some master failed with a transport error, so it
// may have executed the script without us seeing the answer.
func timedOut(rs []quorum.Reply) bool {
	for _, r := range rs {
		if r.Err != nil && isNetErr(r.Err) {
			return true
		}
	}
	return false
}

// parseAcquire reads an acquire script's answer for a fan-out.
func parseAcquire(cmd *redis.Cmd) (any, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if _, _, ok := acquireAnswer(v); !ok {
		return nil, fmt.Errorf("acquire script answered %v", v)
	}
	return v, nil
}

// parseInt reads a script's integer answer for a fan-out.
func parseInt(cmd *redis.Cmd) (any, error) { return cmd.Int64() }

// acquireAnswer reads an acquire script's answer {code, n}; ok is false when
// it has another shape.
func acquireAnswer(v any) (code, n int64, ok bool) {
	a, _ := v.([]any)
	if len(a) != 2 {
		return 0, 0, false
	}
	code, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	return code, n, ok1 && ok2
}

// granted tells an acquire answer that took the lock.
func granted(r quorum.Reply) bool {
	code, _, ok := acquireAnswer(r.Val)
	return ok && r.Err == nil && code == 1
}

// isOne tells a script answer of 1.
func isOne(r quorum.Reply) bool {
	v, ok := r.Val.(int64)
	return ok && r.Err == nil && v == 1
}

func (c *Client) retryAfter(waits []time.Duration, need int) time.Duration {
	slices.Sort(waits)
	d := 10 * time.Millisecond
	if need >= 1 && need <= len(waits) {
		d = waits[need-1] + time.Millisecond
	} else if len(waits) > 0 {
		d = waits[len(waits)-1] + time.Millisecond
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// agreed returns the value at least q of the fences share, if any, else the
// largest fence.
func agreed(fences []int64, q int) (int64, bool) {
	var best int64
	for _, f := range fences {
		n := 0
		for _, g := range fences {
			if g == f {
				n++
			}
		}
		if n >= q {
			return f, true
		}
		best = max(best, f)
	}
	return best, false
}

// syncFence writes the largest fence to every master where the lock is held by
// token, and needs a quorum of acknowledgements: the fence then sits on a
// majority, so any later holder's majority sees it and goes above it.
func (c *Client) syncFence(ctx context.Context, k keys, token string, ttl time.Duration, fences []int64) (int64, error) {
	fence := slices.Max(fences)
	share := ""
	if k.kind.share() {
		share = "s"
	}
	// a write-back runs on a quorum only: standalone masters, where the
	// forgotten floor's key may sit beside the lock's
	line := c.scripts.fenceSync.Line([]string{k.lock, k.fence, c.g.MarkerKey() + quorum.ForgottenSuffix}, token, strconv.FormatInt(fence, 10), share)
	rs := c.fan(ctx, ttl, c.scripts.fenceSync, line, parseInt, isOne)
	acks, _, errs := tally(rs)
	if acks < c.quorum {
		err := fmt.Errorf("fencing token %d confirmed by %d masters, %d needed", fence, acks, c.quorum)
		if len(errs) > 0 {
			err = fmt.Errorf("%w: %w", err, joinErrs(errs))
		}
		return 0, err
	}
	return fence, nil
}

// releaseOn runs the release script on every master and returns the answers.
func (c *Client) releaseOn(ctx context.Context, k keys, token string, ttl time.Duration) []quorum.Reply {
	if ctx.Err() != nil {
		// the caller gave up; still clean up, bounded
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.masterTimeout(ttl))
		defer cancel()
	}
	s, line := c.releaseLine(k, token)
	return c.fan(ctx, ttl, s, s.Line(line.keys, line.args...), parseInt, nil)
}

// scriptCall is one script call's keys and args.
type scriptCall struct {
	keys []string
	args []any
}

// releaseLine is the release script of k's kind and its call for token.
func (c *Client) releaseLine(k keys, token string) (*quorum.Script, scriptCall) {
	switch k.kind {
	case kindWrite:
		return c.scripts.release, scriptCall{[]string{k.lock, k.fence}, []any{token, c.wakeArg, k.name, "a"}}
	case kindRead:
		return c.scripts.releaseShare, scriptCall{[]string{k.lock}, []any{token, c.wakeArg, k.name, "rw"}}
	case kindSlot:
		return c.scripts.releaseShare, scriptCall{[]string{k.lock}, []any{token, c.wakeArg, k.name, "q"}}
	}
	return c.scripts.release, scriptCall{[]string{k.lock, k.fence}, []any{token, c.wakeArg, k.name}}
}
