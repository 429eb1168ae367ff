package locking

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MultiLease holds several locks as one: all of them, or (on failure) none.
// It ends, and its Done channel closes, when any of its leases ends (lost,
// or the client closed); Release releases them all.
type MultiLease struct {
	leases []*Lease // in the canonical (sorted key) order
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   []func() bool
}

// TryLockAll makes one attempt to take every lock in keys for ttl, in a
// canonical order (sorted, duplicates dropped), so that callers asking for
// overlapping sets in any order cannot deadlock each other. If any is taken
// or fails, the locks already taken are released and it returns that
// error (an *ObtainError, as TryLock's): the caller holds none. Options are
// TryLock's (WithAutoExtend applies to every lease). Keys may live in
// different Redis Cluster slots: each lock is its own script call.
func (c *Client) TryLockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*MultiLease, error) {
	return c.lockAll(ctx, keys, func(key string) (*Lease, error) { return c.TryLock(ctx, key, ttl, opts...) })
}

// LockAll takes every lock in keys, waiting for each as Lock does, in the
// canonical order (so overlapping sets cannot deadlock); leases are
// auto-extended unless WithAutoExtend(false). When ctx ends or a lock
// fails, the locks already taken are released and the error is returned:
// the caller holds none.
func (c *Client) LockAll(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*MultiLease, error) {
	return c.lockAll(ctx, keys, func(key string) (*Lease, error) { return c.Lock(ctx, key, ttl, opts...) })
}

func (c *Client) lockAll(ctx context.Context, keys []string, lock func(key string) (*Lease, error)) (*MultiLease, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys to lock", ErrInvalid)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	m := &MultiLease{}
	for _, key := range sorted {
		l, err := lock(key)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			relErr := m.Release(rctx)
			if relErr != nil && !errors.Is(relErr, ErrNotHeld) {
				err = errors.Join(err, relErr)
			}
			return nil, fmt.Errorf("locking: lock %q of %d: %w", key, len(sorted), err)
		}
		m.leases = append(m.leases, l)
	}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	for _, l := range m.leases {
		m.stop = append(m.stop, context.AfterFunc(l.Context(), func() { m.cancel(l.Err()) }))
	}
	return m, nil
}

// Leases returns the leases, in key order: their Key, Fence and Deadline.
func (m *MultiLease) Leases() []*Lease { return slices.Clone(m.leases) }

// Context ends when any of the leases ends; its cause is that lease's Err.
func (m *MultiLease) Context() context.Context { return m.ctx }

// Done is closed when any of the leases ends.
func (m *MultiLease) Done() <-chan struct{} { return m.ctx.Done() }

// Err is nil while every lease is held, else the reason of the first that
// ended.
func (m *MultiLease) Err() error {
	if m.ctx.Err() == nil {
		return nil
	}
	return context.Cause(m.ctx)
}

// Release releases every lease (token-checked) and returns their errors
// joined (ErrNotHeld for those already ended).
func (m *MultiLease) Release(ctx context.Context) error {
	var errs []error
	for i := len(m.leases) - 1; i >= 0; i-- {
		if err := m.leases[i].Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range m.stop {
		s()
	}
	if m.cancel != nil {
		m.cancel(ErrReleased)
	}
	return errors.Join(errs...)
}
