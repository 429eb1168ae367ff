package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// maxOps bounds every measurement loop in count; the cell duration bounds it
// in time.
const maxOps = 10_000_000

// warmUp takes and releases key once, retrying a few times: the first contact
// loads scripts, dials connections, subscribes (baton Lock) and, on fresh
// quorum masters, lets baton mark them. Bounded by 50 attempts and 10s.
func warmUp(r runner, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for range 50 {
		var unlock func(context.Context) error
		if unlock, err = r.lock(ctx, key); err == nil {
			return unlock(ctx)
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("warm-up of %q: %w", key, err)
}

// pairsResult is one uncontended measurement.
type pairsResult struct {
	pairs    int64
	elapsed  time.Duration
	errs     int64
	firstErr error
}

func (p pairsResult) rate() float64 { return float64(p.pairs) / p.elapsed.Seconds() }

// measurePairs runs conc goroutines for d, each taking and releasing its own
// key (keyBase:g) as fast as it can, and counts completed lock+unlock pairs.
func measurePairs(r runner, conc int, d time.Duration, keyBase string) (pairsResult, error) {
	for g := range conc {
		if err := warmUp(r, fmt.Sprintf("%s:%d", keyBase, g)); err != nil {
			return pairsResult{}, err
		}
	}
	var (
		pairs, errs atomic.Int64
		errOnce     sync.Once
		firstErr    error
		wg          sync.WaitGroup
	)
	ctx := context.Background()
	start := time.Now()
	end := start.Add(d)
	for g := range conc {
		key := fmt.Sprintf("%s:%d", keyBase, g)
		wg.Go(func() {
			fail := func(err error) {
				errs.Add(1)
				errOnce.Do(func() { firstErr = err })
			}
			for i := 0; i < maxOps && time.Now().Before(end); i++ {
				unlock, err := r.lock(ctx, key)
				if err != nil {
					fail(err)
					continue
				}
				if err := unlock(ctx); err != nil {
					fail(err)
					continue
				}
				pairs.Add(1)
			}
		})
	}
	wg.Wait()
	return pairsResult{pairs: pairs.Load(), elapsed: time.Since(start), errs: errs.Load(), firstErr: firstErr}, nil
}

// contendConfig describes one contended cell.
type contendConfig struct {
	workers int           // goroutines on the one key
	hold    time.Duration // time.Sleep inside the critical section
	pause   time.Duration // after unlock, before the next attempt
	window  time.Duration // measurement window
	timeout time.Duration // deadline of every lock attempt
}

// contendResult is one contended measurement. Acquisitions, handoffs and
// re-acquisitions count what happened inside the window; waits and failures
// belong to the attempts that started inside it, followed to their end (the
// load goes on until every such attempt has finished, at most timeout later).
type contendResult struct {
	acquired   int64           // successful locks inside the window
	handoffs   []time.Duration // unlock start by A -> lock return by B != A
	reacquired int64           // acquisitions by the goroutine that unlocked last
	waits      []time.Duration // attempt start -> acquired
	failed     int64           // attempts that ended in an error (timeout, tries exhausted)
	failErr    error
	unlockErrs int64
	overlaps   int64 // acquisitions while another goroutine held the lock: must be 0
	commands   int64 // commands the library sent inside the window
}

// measureContended runs cfg.workers goroutines on one key: lock, hold, unlock,
// pause, repeat. cmds reads the library's command counter.
func measureContended(r runner, cfg contendConfig, key string, cmds *cmdCounter) (contendResult, error) {
	if err := warmUp(r, key); err != nil {
		return contendResult{}, err
	}
	var (
		res      contendResult
		mu       sync.Mutex // guards res and the last-unlock record
		lastG    = -1
		lastAt   time.Time
		inside   atomic.Int32
		pending  atomic.Int64 // attempts started in the window, not finished
		wg       sync.WaitGroup
		cmdStart = cmds.n.Load()
	)
	start := time.Now()
	end := start.Add(cfg.window)
	// hard stop: no attempt started in the window can outlive this
	hard, cancel := context.WithDeadline(context.Background(), end.Add(cfg.timeout+2*time.Second))
	defer cancel()

	for g := range cfg.workers {
		wg.Go(func() {
			for i := 0; i < maxOps && hard.Err() == nil; i++ {
				pending.Add(1)
				t0 := time.Now()
				inWindow := t0.Before(end)
				if !inWindow && pending.Add(-1) == 0 {
					return // the window is over and every attempt in it has ended
				}
				actx, acancel := context.WithTimeout(hard, cfg.timeout)
				unlock, err := r.lock(actx, key)
				t1 := time.Now()
				acancel()
				if err != nil {
					if inWindow {
						if hard.Err() == nil {
							mu.Lock()
							res.failed++
							if res.failErr == nil {
								res.failErr = err
							}
							mu.Unlock()
						}
						pending.Add(-1)
					}
					if time.Since(t0) < time.Millisecond {
						time.Sleep(time.Millisecond) // no hot loop on instant errors
					}
					continue
				}
				overlap := inside.Add(1) != 1
				mu.Lock()
				if overlap {
					res.overlaps++
				}
				if t1.Before(end) {
					res.acquired++
					switch {
					case lastG == g:
						res.reacquired++
					case lastG >= 0:
						res.handoffs = append(res.handoffs, t1.Sub(lastAt))
					}
				}
				if inWindow {
					res.waits = append(res.waits, t1.Sub(t0))
				}
				mu.Unlock()
				if inWindow {
					pending.Add(-1)
				}

				time.Sleep(cfg.hold)
				inside.Add(-1)
				mu.Lock()
				lastG, lastAt = g, time.Now()
				mu.Unlock()
				uctx, ucancel := context.WithTimeout(context.Background(), cfg.timeout)
				if err := unlock(uctx); err != nil {
					mu.Lock()
					res.unlockErrs++
					mu.Unlock()
				}
				ucancel()
				if cfg.pause > 0 {
					time.Sleep(cfg.pause)
				}
			}
		})
	}
	time.Sleep(time.Until(end))
	cmdEnd := cmds.n.Load()
	wg.Wait()
	res.commands = cmdEnd - cmdStart
	return res, nil
}
