package locking

import (
	"context"
	"fmt"
	"time"
)

// RWMutex is a read/write lock: many readers or one writer. Every holding is
// a Lease like a mutex's (own token, a fence from the lock's counter,
// auto-extension, Done, token-checked release, wake-up on release), and
// works on one master or a quorum (a reader holds its share on a majority,
// a writer the key on a majority; any two majorities meet on a master that
// refuses the second).
//
// It is write-preferring: a writer waiting in Lock records an intent that
// keeps new readers out, so a stream of readers cannot starve it; readers
// already in finish first. The intent expires a little after the wait the
// writer was last told (the longest remaining share or ttl), so a writer
// that died waiting blocks readers for about one ttl more at most. Each
// reader's share is its own entry with its own expiry, never a shared
// counter: a reader that dies frees its share at its ttl, and nothing can
// drop a count below zero. TryLock does not record an intent.
//
// As with Go's sync.RWMutex, a goroutine must not RLock again while holding
// a read lease: a writer waiting in between blocks the second RLock until
// the writer gets in, which waits for the first read lease.
//
// The lock named NAME lives in the keys of the lock named "rw:NAME".
type RWMutex struct {
	c    *Client
	name string
}

// RWMutex returns the read/write lock called name. It fails with ErrInvalid
// on an empty name.
func (c *Client) RWMutex(name string) (*RWMutex, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty read/write lock name", ErrInvalid)
	}
	return &RWMutex{c: c, name: name}, nil
}

func (m *RWMutex) keys(k kind) keys {
	ks := m.c.keysFor(rwLock(m.name))
	ks.kind = k
	return ks
}

// RLock takes a read share for ttl, waiting while a writer holds the lock or
// waits for it. It is Lock's counterpart: woken when the writer releases,
// auto-extended unless WithAutoExtend(false), ctx bounds the wait.
func (m *RWMutex) RLock(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return m.c.lock(ctx, m.keys(kindRead), ttl, opts)
}

// TryRLock makes one attempt at a read share (as TryLock: an error wrapping
// ErrNotObtained while a writer holds or waits).
func (m *RWMutex) TryRLock(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return m.c.tryLock(ctx, m.keys(kindRead), ttl, opts)
}

// Lock takes the write lock for ttl, waiting while readers or another writer
// hold it; while it waits, new readers wait behind it. Woken when the last
// reader or the writer before it releases.
func (m *RWMutex) Lock(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return m.c.lock(ctx, m.keys(kindWrite), ttl, opts)
}

// TryLock makes one attempt at the write lock (an error wrapping
// ErrNotObtained while anyone holds it).
func (m *RWMutex) TryLock(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lease, error) {
	return m.c.tryLock(ctx, m.keys(kindWrite), ttl, opts)
}
