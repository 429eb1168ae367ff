package locking

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

// HeldLock is a lock held now, as the masters report it.
type HeldLock struct {
	// Name is the lock's name, as given to Lock.
	Name string `json:"name"`
	// Masters is how many masters hold its key; a lock with fewer than a
	// quorum is being acquired, released or has expired on the others.
	Masters int `json:"masters"`
	// Quorum is how many masters make it held.
	Quorum int `json:"quorum"`
	// TTL is the remaining time to live of its key, the shortest among the
	// masters that hold it: the lease ends by then unless extended.
	TTL time.Duration `json:"ttl"`
	// Fence is the highest fencing counter among the masters that answered:
	// at least the holder's token (masters' counters may run ahead of it,
	// and a later acquisition may be under way).
	Fence int64 `json:"fence"`
	// Shares is how many live shares a shared lock has (a read/write
	// lock's readers, "rw:NAME"; a fair semaphore's holders, "fsem:NAME"),
	// the most any master reports; 0 for a lock held by one holder.
	Shares int `json:"shares,omitempty"`
}

// scanBatch is how many keys one SCAN step asks for.
const scanBatch = 1000

// Held lists the locks whose keys exist on at least one master now, by
// name, with how many masters hold each, the shortest remaining TTL and the
// newest fence. It scans each master's keys under the client's prefix
// (SCAN, which does not block Redis, and sees keys that exist throughout
// the scan); masters that fail are skipped and reported in the error, which
// wraps ErrUnavailable when no master answered. A fencing counter that holds
// no integer from 0 to 2^53-2 is left out of Fence and reported in the
// error too (a *CorruptError naming the master and the key, wrapping
// ErrCorrupt). It is meant for operators
// (`baton locks`): a lock can be taken or released as soon as it returns.
func (c *Client) Held(ctx context.Context) ([]HeldLock, error) {
	masters := c.g.Masters()
	per := make([]map[string]found, len(masters))
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	for i, m := range masters {
		wg.Go(func() {
			per[i], errs[i] = scanHeld(ctx, m.RDB, c.opts.prefix)
		})
	}
	wg.Wait()
	merged := map[string]*HeldLock{}
	answered := 0
	var failures []string
	var corrupt []error
	for i, m := range per {
		if errs[i] != nil {
			failures = append(failures, fmt.Sprintf("master %d (%s): %v", i, masters[i].Addr, errs[i]))
			continue
		}
		answered++
		for name, f := range m {
			h := merged[name]
			if h == nil {
				h = &HeldLock{Name: name, Quorum: c.quorum, TTL: f.ttl}
				merged[name] = h
			}
			h.Masters++
			if f.corrupt != nil {
				corrupt = append(corrupt, &CorruptError{Addr: masters[i].Addr, Key: fenceKey(c.opts.prefix, name), Value: *f.corrupt})
			}
			h.TTL = min(h.TTL, f.ttl)
			h.Fence = max(h.Fence, f.fence)
			h.Shares = max(h.Shares, f.shares)
		}
	}
	out := make([]HeldLock, 0, len(merged))
	for _, h := range merged {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b HeldLock) int { return strings.Compare(a.Name, b.Name) })
	var err error
	switch {
	case answered == 0 && len(failures) > 0:
		err = fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(failures, "; "))
	case len(failures) > 0:
		err = fmt.Errorf("locking: some masters did not answer: %s", strings.Join(failures, "; "))
	}
	if len(corrupt) > 0 {
		slices.SortFunc(corrupt, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		err = errors.Join(err, joinErrs(corrupt))
	}
	return out, err
}

// readFence reads a fencing counter for Held: its value, or what it holds
// when that is no counter (nil when it is one, or absent).
func readFence(cmd *redis.StringCmd) (int64, *string) {
	v, err := cmd.Result()
	if err != nil {
		return 0, nil
	}
	n, ok := quorum.ParseCounter(v)
	if !ok {
		if len(v) > 64 {
			v = v[:64]
		}
		return 0, &v
	}
	return n, nil
}

// found is one lock key on one master: its remaining ttl and fencing
// counter.
type found struct {
	ttl     time.Duration
	fence   int64
	corrupt *string // what the fencing counter holds when it is no counter
	shares  int     // live entries of the share set (readers, fair-semaphore holders)
}

// scanHeld returns the lock keys under prefix on one master: PREFIX{NAME}
// exactly (not its fence, queue or leader records), and the share sets
// PREFIX{NAME}:r of shared locks, by name.
func scanHeld(ctx context.Context, rdb redis.UniversalClient, prefix string) (map[string]found, error) {
	out := map[string]found{}
	var names, shared []string
	var mu sync.Mutex
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		for _, pattern := range heldPatterns {
			iter := node.Scan(ctx, 0, escapeGlob(prefix)+pattern, scanBatch).Iterator()
			for iter.Next(ctx) {
				name, isShares, ok := heldName(prefix, iter.Val())
				mu.Lock()
				switch {
				case ok && !isShares:
					names = append(names, name)
				case ok:
					shared = append(shared, name)
				}
				mu.Unlock()
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// SCAN on a Cluster client reaches one node: ask every primary
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	for chunk := range slices.Chunk(names, 256) {
		pipe := rdb.Pipeline()
		ttls := make([]*redis.DurationCmd, len(chunk))
		fences := make([]*redis.StringCmd, len(chunk))
		for i, name := range chunk {
			ttls[i] = pipe.PTTL(ctx, lockKey(prefix, name))
			fences[i] = pipe.Get(ctx, fenceKey(prefix, name))
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, err
		}
		for i, name := range chunk {
			ttl := ttls[i].Val()
			if ttl <= 0 {
				continue // gone since the scan, or kept without expiry (not a lock of ours)
			}
			fence, bad := readFence(fences[i])
			out[name] = found{ttl: ttl, fence: fence, corrupt: bad}
		}
	}
	if len(shared) == 0 {
		return out, nil
	}
	now, err := rdb.Time(ctx).Result() // entries are scored by the server's clock
	if err != nil {
		return nil, err
	}
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	for chunk := range slices.Chunk(shared, 256) {
		pipe := rdb.Pipeline()
		live := make([]*redis.IntCmd, len(chunk))
		last := make([]*redis.ZSliceCmd, len(chunk))
		fences := make([]*redis.StringCmd, len(chunk))
		for i, name := range chunk {
			key := sharesKey(prefix, name)
			live[i] = pipe.ZCount(ctx, key, "("+nowMs, "+inf")
			last[i] = pipe.ZRangeWithScores(ctx, key, 0, 0) // the first share to lapse
			fences[i] = pipe.Get(ctx, fenceKey(prefix, name))
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, err
		}
		for i, name := range chunk {
			n := int(live[i].Val())
			if n == 0 {
				continue
			}
			f := out[name] // a writer may hold the key as well
			f.shares = n
			fence, bad := readFence(fences[i])
			f.fence = max(f.fence, fence)
			if f.corrupt == nil {
				f.corrupt = bad
			}
			if zs := last[i].Val(); len(zs) > 0 {
				if ttl := time.Duration(int64(zs[0].Score)-now.UnixMilli()) * time.Millisecond; ttl > 0 && (f.ttl == 0 || ttl < f.ttl) {
					f.ttl = ttl
				}
			}
			out[name] = f
		}
	}
	return out, nil
}

// escapeGlob escapes the glob characters of s for SCAN MATCH.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
