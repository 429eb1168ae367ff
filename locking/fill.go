package locking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cache is the part of a go-redis client Fill reads and writes the cached
// value with (a *redis.Client, ClusterClient or any UniversalClient).
type Cache interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
}

// FillLockTTL is the default ttl of the lock Fill computes under (kept alive
// while compute runs): how long a computer that crashed keeps the others
// waiting.
const FillLockTTL = 10 * time.Second

// Fill returns the value cached at key in cache, and on a miss computes it
// once across every process that uses this lock client's masters: the first
// caller takes the lock "fill:KEY", checks the cache again, runs compute
// under the lock's context (it ends if the lock is lost) and stores the
// value for ttl; the others wait for the lock (woken when it is released),
// then find the value stored and return it without computing. An error of
// compute is returned to its caller and not cached: the next caller
// computes again. A computer that crashes frees the lock at its ttl
// (FillLockTTL; WithFillLockTTL sets another). ctx bounds the wait and the
// computation; a cache that fails is an error, never a reason to compute.
func (c *Client) Fill(ctx context.Context, cache Cache, key string, ttl time.Duration, compute func(ctx context.Context) ([]byte, error), opts ...FillOption) ([]byte, error) {
	o := fillOptions{lockTTL: FillLockTTL}
	for _, opt := range opts {
		opt(&o)
	}
	lockTTL := o.lockTTL
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: fill %q: ttl %v must be > 0", ErrInvalid, key, ttl)
	}
	if v, ok, err := cached(ctx, cache, key); err != nil || ok {
		return v, err
	}
	var out []byte
	err := c.Hold(ctx, fillLock(key), lockTTL, func(ctx context.Context) error {
		// another caller may have filled it while this one waited
		v, ok, err := cached(ctx, cache, key)
		if err != nil || ok {
			out = v
			return err
		}
		v, err = compute(ctx)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			// the lock was lost while computing: another caller may be
			// computing too; the value is returned but not stored
			out = v
			return nil
		}
		if err := cache.Set(ctx, key, v, ttl).Err(); err != nil {
			return fmt.Errorf("locking: fill %q: store: %w", key, err)
		}
		out = v
		return nil
	})
	if err != nil && out != nil && errors.Is(err, ErrLost) {
		return out, nil // computed; only the lock's end came late
	}
	return out, err
}

// FillOption configures one Fill.
type FillOption func(*fillOptions)

type fillOptions struct{ lockTTL time.Duration }

// WithFillLockTTL sets the ttl of the lock Fill computes under (default
// FillLockTTL): how long a computer that crashed keeps the others waiting.
// Values <= 0 keep the default.
func WithFillLockTTL(d time.Duration) FillOption {
	return func(o *fillOptions) {
		if d > 0 {
			o.lockTTL = d
		}
	}
}

// cached reads key: the value and true on a hit, false on a miss.
func cached(ctx context.Context, cache Cache, key string) ([]byte, bool, error) {
	v, err := cache.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("locking: fill %q: read: %w", key, err)
	}
	return v, true, nil
}
