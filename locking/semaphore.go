package locking

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Semaphore lets at most Limit holders hold a named resource at once. It is
// Limit locks ("sem:NAME#0" ... "sem:NAME#Limit-1"), one per slot: each
// holder holds one slot's lease, with everything a lock's lease has (its
// own token and expiry, a fence, auto-extension, Done, wake-up on release).
// So a crashed holder frees its slot at its ttl, and the count holds under a
// quorum of masters too (each slot is a Redlock; a counter could not be:
// with N=2 on three masters a quorum-counted semaphore lets three hold).
// Changing Limit on a live name: holders of slots at or above a lowered
// limit keep them until they release. It is not fair: whoever tries when a
// slot is free takes it (FairSemaphore is first come, first served).
type Semaphore struct {
	c     *Client
	name  string
	limit int
	fair  bool
}

// Semaphore returns the semaphore called name with limit slots. It fails
// with ErrInvalid on an empty name or a limit below 1.
func (c *Client) Semaphore(name string, limit int) (*Semaphore, error) {
	if name == "" || limit < 1 {
		return nil, fmt.Errorf("%w: semaphore %q with limit %d (want a name and a limit >= 1)", ErrInvalid, name, limit)
	}
	return &Semaphore{c: c, name: name, limit: limit}, nil
}

// FairSemaphore returns a semaphore called name with limit places, served
// first come, first served: a waiter queues, and a place that frees goes to
// the head of the queue (newcomers wait behind it, TryAcquire too). Each
// holder has its own lease and expiry (a holder that dies frees its place
// at its ttl; a waiter that dies leaves the queue at about one ttl). The
// limit is each caller's: a caller with a higher limit takes a place a
// lower one would not, and holders above a lowered limit stay until they
// release.
//
// It counts holders on one Redis, so it needs a client of a single master
// (ErrInvalid otherwise): a quorum of masters cannot count them, as each
// master sees a different majority of holders (limit 2 on three masters
// lets three hold at once). Semaphore works on a quorum, unfairly. A fair
// and an unfair semaphore of the same name are different semaphores.
func (c *Client) FairSemaphore(name string, limit int) (*Semaphore, error) {
	if len(c.masters) > 1 {
		return nil, fmt.Errorf("%w: fair semaphore %q counts holders on one Redis; this client has %d masters (Semaphore works on a quorum)", ErrInvalid, name, len(c.masters))
	}
	s, err := c.Semaphore(name, limit)
	if s != nil {
		s.fair = true
	}
	return s, err
}

func (s *Semaphore) fairKeys() keys {
	k := s.c.keysFor(fairSemLock(s.name))
	k.kind, k.limit = kindSlot, s.limit
	return k
}

// TryAcquire takes a free slot for ttl in one pass over the slots (from a
// random one, so holders spread; a fair semaphore's free place only when
// nobody queues) and returns its lease, or an error
// wrapping ErrNotObtained when all are held (ErrUnavailable when masters
// failed). Options are TryLock's.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	if s.fair {
		l, err := s.c.tryLock(ctx, s.fairKeys(), ttl, opts)
		if err != nil {
			return nil, fmt.Errorf("locking: semaphore %q: %w", s.name, bare(err))
		}
		return l, nil
	}
	start := rand.IntN(s.limit)
	var last error
	for k := range s.limit {
		l, err := s.c.TryLock(ctx, s.slot((start+k)%s.limit), ttl, opts...)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrNotObtained) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("locking: semaphore %q: all %d slots held: %w", s.name, s.limit, bare(last))
}

// Acquire takes a slot for ttl, waiting while all are held: it tries every
// slot (from a random one) and waits for any of them, woken when one is
// released (or re-checking at the earliest holder's expiry), until ctx
// ends. While all are held a round costs one call per slot: for a large
// limit on one Redis, FairSemaphore costs one call a round. A fair
// semaphore's waiter queues and is woken when its turn comes. The lease is
// auto-extended unless WithAutoExtend(false).
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	var l *Lease
	var err error
	if s.fair {
		l, err = s.c.lock(ctx, s.fairKeys(), ttl, opts)
	} else {
		// a pass that registers nowhere first: a free slot costs no wake-ups
		if l, err := s.TryAcquire(ctx, ttl, opts...); err == nil || !errors.Is(err, ErrNotObtained) {
			return l, err
		}
		ks := make([]keys, s.limit)
		for i := range ks {
			ks[i] = s.c.keysFor(s.slot(i))
		}
		l, err = s.c.lockAny(ctx, ks, ttl, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("locking: semaphore %q: %w", s.name, bare(err))
	}
	return l, nil
}
