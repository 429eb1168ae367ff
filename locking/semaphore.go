package locking

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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
// limit keep them until they release.
type Semaphore struct {
	c     *Client
	name  string
	limit int
}

// Semaphore returns the semaphore called name with limit slots. It fails
// with ErrInvalid on an empty name or a limit below 1.
func (c *Client) Semaphore(name string, limit int) (*Semaphore, error) {
	if name == "" || limit < 1 {
		return nil, fmt.Errorf("%w: semaphore %q with limit %d (want a name and a limit >= 1)", ErrInvalid, name, limit)
	}
	return &Semaphore{c: c, name: name, limit: limit}, nil
}

func (s *Semaphore) slot(i int) string { return "sem:" + s.name + "#" + strconv.Itoa(i) }

// TryAcquire takes a free slot for ttl in one pass over the slots (from a
// random one, so holders spread) and returns its lease, or an error
// wrapping ErrNotObtained when all are held (ErrUnavailable when masters
// failed). Options are TryLock's.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
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
	return nil, fmt.Errorf("locking: semaphore %q: all %d slots held: %w", s.name, s.limit, last)
}

// Acquire takes a slot for ttl, waiting while all are held: it tries every
// slot, then waits on one of them (woken when it is released, or at its
// holder's expiry) for at most ttl before trying every slot again, until
// ctx ends. The lease is auto-extended unless WithAutoExtend(false).
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	for {
		l, err := s.TryAcquire(ctx, ttl, append([]LockOption{WithAutoExtend(true)}, opts...)...)
		if err == nil || !errors.Is(err, ErrNotObtained) {
			return l, err
		}
		wctx, cancel := context.WithTimeout(ctx, ttl)
		l, err = s.c.Lock(wctx, s.slot(rand.IntN(s.limit)), ttl, opts...)
		cancel()
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("locking: semaphore %q: %w", s.name, errors.Join(ErrNotObtained, context.Cause(ctx)))
		case !errors.Is(err, ErrNotObtained):
			return nil, err
		}
	}
}
