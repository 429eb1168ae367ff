package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ForgottenSuffix names a master's forgotten floor from its marker key:
// MARKER:forgotten holds one above the largest fencing counter Forget
// deleted on it (lua/forget.lua), and a quorum counter seeded again starts
// above it (q_forgotten in lua/prelude.lua).
const ForgottenSuffix = ":forgotten"

// forgetScript deletes counters under the forgotten floor (lua/forget.lua).
var forgetScript = NewGuardedScript(forgetSrc)

// Forget deletes, on every master, what names that are gone for good (a
// deleted job's) keep: the keys del, and the fencing counters counters. On
// a quorum a counter is deleted under the master's forgotten floor, raised
// above it in the same script, so the name's next fence, seeded again,
// is above every fence it had, whatever the masters' clocks (lua/forget.lua);
// on one master a counter seeded again starts from that master's clock in
// µs, as after its expiry. Each master is bounded by timeout; one script a
// master on a quorum (standalone servers), one DEL per key on one master,
// whose keys may lie in different Redis Cluster slots. The errors of the
// masters that failed are joined (their keys stay as they were).
func (g *Group) Forget(ctx context.Context, timeout time.Duration, del, counters []string) error {
	if len(del)+len(counters) == 0 {
		return nil
	}
	quorum := g.Mode() == "q"
	keys := make([]string, 0, 1+len(counters)+len(del))
	keys = append(append(append(keys, g.opts.Marker+ForgottenSuffix), counters...), del...)
	errs := make([]error, len(g.masters))
	var wg sync.WaitGroup
	for i, m := range g.masters {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var err error
			if quorum {
				err = forgetScript.Run(mctx, m.RDB, keys, len(counters)).Err()
			} else {
				pipe := m.RDB.Pipeline()
				for _, k := range keys[1:] {
					pipe.Del(mctx, k)
				}
				_, err = pipe.Exec(mctx)
			}
			if err != nil {
				errs[i] = fmt.Errorf("master %d (%s): %w", i, m.Addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
