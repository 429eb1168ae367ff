package locking

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
}

// scanBatch is how many keys one SCAN step asks for.
const scanBatch = 1000

// Held lists the locks whose keys exist on at least one master now, by
// name, with how many masters hold each, the shortest remaining TTL and the
// newest fence. It scans each master's keys under the client's prefix
// (SCAN, which does not block Redis, and sees keys that exist throughout
// the scan); masters that fail are skipped and reported in the error, which
// wraps ErrUnavailable when no master answered. It is meant for operators
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
			h.TTL = min(h.TTL, f.ttl)
			h.Fence = max(h.Fence, f.fence)
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
	return out, err
}

// found is one lock key on one master: its remaining ttl and fencing
// counter.
type found struct {
	ttl   time.Duration
	fence int64
}

// scanHeld returns the lock keys under prefix on one master: PREFIX{NAME}
// exactly (not its fence, queue or leader records), by name.
func scanHeld(ctx context.Context, rdb redis.UniversalClient, prefix string) (map[string]found, error) {
	out := map[string]found{}
	var names []string
	var mu sync.Mutex
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, escapeGlob(prefix)+"{*}", scanBatch).Iterator()
		for iter.Next(ctx) {
			name, ok := strings.CutPrefix(iter.Val(), prefix+"{")
			if !ok || !strings.HasSuffix(name, "}") {
				continue
			}
			mu.Lock()
			names = append(names, strings.TrimSuffix(name, "}"))
			mu.Unlock()
		}
		return iter.Err()
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
			ttls[i] = pipe.PTTL(ctx, prefix+"{"+name+"}")
			fences[i] = pipe.Get(ctx, prefix+"{"+name+"}"+fenceSuffix)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, err
		}
		for i, name := range chunk {
			ttl := ttls[i].Val()
			if ttl <= 0 {
				continue // gone since the scan, or kept without expiry (not a lock of ours)
			}
			fence, _ := strconv.ParseInt(fences[i].Val(), 10, 64)
			out[name] = found{ttl, fence}
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
