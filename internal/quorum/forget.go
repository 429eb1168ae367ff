package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// shortenLua sets KEYS[1] to expire in ARGV[1] ms unless it ends sooner or
// is missing (PEXPIRE's LT option, which Redis 6.2 lacks). Sent with EVAL:
// it runs once per name that is gone, not on a hot path.
const shortenLua = `local t = redis.call('PTTL', KEYS[1])
if t == -1 or t > tonumber(ARGV[1]) then return redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 0`

// Forget removes what names that are gone for good (a deleted job's) keep on
// every master: it deletes the keys del, and shortens the life of the
// fencing counters counters to the restart quarantine, unless they end
// sooner. A counter is not deleted outright: the next fence of a name taken
// again is seeded from a master's clock (in µs), which is above every fence
// issued before only once the masters' clocks have moved past their
// differences; a quarantine later they have (the same reasoning as
// CounterTTL, with a shorter wait), and a name taken again meanwhile counts
// on from the counter. Each master is bounded by timeout; one DEL or PEXPIRE
// per key, since the keys of different names lie in different Redis
// Cluster slots. The errors of the masters that failed are joined (their
// keys stay as they were).
func (g *Group) Forget(ctx context.Context, timeout time.Duration, del, counters []string) error {
	if len(del)+len(counters) == 0 {
		return nil
	}
	errs := make([]error, len(g.masters))
	var wg sync.WaitGroup
	for i, m := range g.masters {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			pipe := m.RDB.Pipeline()
			for _, k := range del {
				pipe.Del(mctx, k)
			}
			ms := g.opts.Quarantine.Milliseconds()
			for _, k := range counters {
				pipe.Eval(mctx, shortenLua, []string{k}, ms)
			}
			if _, err := pipe.Exec(mctx); err != nil {
				errs[i] = fmt.Errorf("master %d (%s): %w", i, m.Addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
