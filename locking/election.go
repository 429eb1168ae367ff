package locking

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

// Leader election on top of a lease: candidates Campaign for the election's
// lock (waiting like Lock: woken when the leader resigns, re-checking at the
// lease's expiry when it died), the winner records who leads in a companion
// key and announces it on the wake channel, and Leader reads that record
// only while its lease still holds the lock, so a dead leader is never
// reported once its key expired. Observe reads it again at each
// announcement.

var (
	electInfoScript = quorum.NewScript(electInfoSrc)
	observeScript   = quorum.NewScript(observeSrc)
)

// Election is a named election among candidates on the client's masters.
// Its lock is named "election:"+name (key PREFIX{election:NAME}); the
// leader record lives in PREFIX{election:NAME}:leader.
type Election struct {
	c    *Client
	name string
	lock string // the lock's name
	keys keys
	ttl  time.Duration
}

// Leader describes the current leader.
type Leader struct {
	ID    string    `json:"id"`    // the candidate id given to Campaign
	Since time.Time `json:"since"` // when the term began (a master's clock, ms precision)
	Fence int64     `json:"fence"` // the term's fencing token
}

// Election returns the election called name whose leaders hold a lease of
// ttl (auto-extended). It fails with ErrInvalid on an empty name or a ttl
// Lock would refuse (below MinTTL, not whole milliseconds), and with
// ErrClosed on a closed client.
func (c *Client) Election(name string, ttl time.Duration) (*Election, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty election name", ErrInvalid)
	}
	lock := electionLock(name)
	if err := c.validate(keys{name: lock}, ttl, &lockOptions{}); err != nil {
		return nil, err
	}
	return &Election{c: c, name: name, lock: lock, keys: c.keysFor(lock), ttl: ttl}, nil
}

// Term is one leadership: it lasts while its auto-extended lease is held.
type Term struct {
	e      *Election
	lease  *Lease
	leader Leader
}

// Campaign blocks until this candidate leads or ctx ends; id names the
// candidate (e.g. a replica id) and must not be empty. Waiting candidates are
// woken when the leader resigns, and re-check at the lease's expiry when the
// leader died without resigning. When ctx ends first Campaign returns an error
// joining ErrNotObtained and ctx.Err(). ctx bounds only the wait: the term
// lasts until Resign, loss of the lease or Close.
func (e *Election) Campaign(ctx context.Context, id string) (*Term, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty candidate id in election %q", ErrInvalid, e.name)
	}
	c := e.c
	for {
		l, err := c.Lock(ctx, e.lock, e.ttl)
		if err != nil {
			return nil, err
		}
		since, retry, err := e.record(ctx, l, id)
		if err == nil {
			// the record lives as long as the term: each extension of
			// the lease pushes its expiry out too
			l.keepWith(e.leaderKey(), e.recordPX())
			return &Term{e: e, lease: l, leader: Leader{ID: id, Since: time.UnixMilli(since), Fence: l.Fence()}}, nil
		}
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.masterTimeout(e.ttl))
		_ = l.Release(relCtx)
		cancel()
		if ctx.Err() != nil {
			return nil, waitEnded(err, ctx)
		}
		if !retry {
			return nil, err
		}
	}
}

// record writes the leader record on every master where the lease holds the
// lock and needs a quorum. It returns the term's start (the earliest of the
// masters' clocks), and on failure whether campaigning again may help (the
// lease was found gone, rather than masters failing).
func (e *Election) record(ctx context.Context, l *Lease, id string) (int64, bool, error) {
	c := e.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.masterTimeout(e.ttl))
	defer cancel()
	line := electInfoScript.Line([]string{e.keys.lock, e.leaderKey()}, l.Token(), id, strconv.FormatInt(l.Fence(), 10), e.recordPX(), c.wakeArg, e.lock)
	rs := c.fan(ctx, e.ttl, electInfoScript, line, parseInt,
		func(r quorum.Reply) bool { v, ok := r.Val.(int64); return ok && r.Err == nil && v > 0 })
	acks, gone := 0, 0
	var since int64
	var errs []error
	for _, r := range rs {
		switch {
		case errors.Is(r.Err, quorum.ErrPending):
		case r.Err != nil:
			errs = append(errs, masterErr(r))
		case r.Val.(int64) > 0:
			if v := r.Val.(int64); acks == 0 || v < since {
				since = v
			}
			acks++
		default:
			gone++
		}
	}
	if acks >= c.quorum {
		return since, false, nil
	}
	if len(errs) > 0 {
		return 0, gone > 0, fmt.Errorf("%w: election %q: leader recorded on %d masters, %d needed: %w", ErrUnavailable, e.name, acks, c.quorum, joinErrs(errs))
	}
	err := fmt.Errorf("locking: election %q: leader recorded on %d masters, %d needed (the lease was lost meanwhile)", e.name, acks, c.quorum)
	return 0, gone > 0, err
}

// recordPX is the leader record's expiry in ms: it outlives the lease (an
// extension pushes both out; a record whose lease has gone is ignored by
// Leader anyway).
func (e *Election) recordPX() int64 { return 10 * e.ttl.Milliseconds() }

// Leader returns who leads now; ok is false when nobody does (no lease holds
// the lock, or its holder has not recorded itself yet). A leader is reported
// only while its lease's key exists on the masters, and with several masters
// only when a quorum agrees on the same lease. It fails, wrapping
// ErrUnavailable, when too few masters answered to decide.
func (e *Election) Leader(ctx context.Context) (Leader, bool, error) {
	c := e.c
	if c.closed() {
		return Leader{}, false, ErrClosed
	}
	line := observeScript.Line([]string{e.keys.lock, e.leaderKey()})
	rs := c.fan(ctx, e.ttl, observeScript, line, func(cmd *redis.Cmd) (any, error) {
		v, err := cmd.Slice()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return parseLeader(v)
	}, nil)
	var got []observed
	var errs []error
	for _, r := range rs {
		switch {
		case r.Err != nil:
			errs = append(errs, masterErr(r))
		case r.Val != nil:
			got = append(got, r.Val.(observed))
		}
	}
	for _, s := range got {
		n := 0
		best := s.l
		for _, o := range got {
			if o.token == s.token {
				n++
				if o.l.Since.Before(best.Since) {
					best.Since = o.l.Since
				}
			}
		}
		if n >= c.quorum {
			return best, true, nil
		}
	}
	if len(errs) > len(c.masters)-c.quorum {
		return Leader{}, false, fmt.Errorf("%w: observing election %q: %w", ErrUnavailable, e.name, joinErrs(errs))
	}
	return Leader{}, false, nil
}

// Observe streams the election's leaders, as etcd's Election.Observe does:
// the channel yields the current leader, if any, and then each new leader
// as its term begins, once per term (terms are told apart by their
// fence), until ctx ends or the client closes; the channel is closed then.
// A term that begins and ends while the reader is not receiving may be
// skipped: the next value is always the leader of the moment it was read.
// Nobody leading is not sent.
//
// A new leader announces itself on the client's wake channel when it
// records its term, and the observer reads the record (as Leader does) at
// each announcement, at every re-subscription of the channel, and at least
// once per the election's ttl; reads that fail (masters unavailable) are
// retried then.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	c := e.c
	out := make(chan Leader)
	wake := make(chan struct{}, 1)
	if c.closed() {
		close(out)
		return out
	}
	c.hub.observe(e.lock, wake)
	run := func() {
		defer close(out)
		defer c.hub.unobserve(e.lock, wake)
		c.hub.ensure(ctx, c.masterTimeout(e.ttl))
		var last int64 // fence of the last term sent; fences are > 0
		for {
			l, ok, err := e.Leader(ctx)
			if err == nil && ok && l.Fence != last {
				select {
				case out <- l:
					last = l.Fence
				case <-ctx.Done():
					return
				case <-c.ctx.Done():
					return
				}
				continue // read again: the term sent may have ended meanwhile
			}
			t := time.NewTimer(e.ttl)
			select {
			case <-wake:
				t.Stop()
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.ctx.Done():
				t.Stop()
				return
			}
		}
	}
	if !c.g.Spawn(run) {
		c.hub.unobserve(e.lock, wake)
		close(out)
	}
	return out
}

// observed is one master's view of the leader.
type observed struct {
	token string
	l     Leader
}

func parseLeader(v []any) (any, error) {
	if len(v) != 4 {
		return nil, fmt.Errorf("observe: %d fields", len(v))
	}
	s := make([]string, 4)
	for i, x := range v {
		str, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("observe: field %d is %T", i, x)
		}
		s[i] = str
	}
	since, err := strconv.ParseInt(s[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("observe: since: %w", err)
	}
	fence, err := strconv.ParseInt(s[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("observe: fence: %w", err)
	}
	return observed{token: s[0], l: Leader{ID: s[1], Since: time.UnixMilli(since), Fence: fence}}, nil
}

// Context returns a context that ends when leadership is lost or resigned
// (the lease's context; context.Cause says why).
func (t *Term) Context() context.Context { return t.lease.Context() }

// Done returns a channel closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.lease.Done() }

// Err returns nil while leading, and then why the term ended (see Lease.Err).
func (t *Term) Err() error { return t.lease.Err() }

// Fence returns the leadership's fencing token: it strictly increases from
// one term to the next.
func (t *Term) Fence() int64 { return t.lease.Fence() }

// Deadline returns the term's validity deadline; it moves with extensions.
func (t *Term) Deadline() time.Time { return t.lease.Deadline() }

// Lease returns the lease behind the term.
func (t *Term) Lease() *Lease { return t.lease }

// Leader returns this term's leader record.
func (t *Term) Leader() Leader { return t.leader }

// Resign ends the term: the lease is released with the token check, which
// wakes the next candidate. It returns an error wrapping ErrNotHeld when the
// term had already ended (lost, resigned, client closed).
func (t *Term) Resign(ctx context.Context) error { return t.lease.Release(ctx) }
