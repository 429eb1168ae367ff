package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// floorResult is what writing N tasks into an asynq queue costs an idle
// Redis, one way: no claim, no commit, no worker, nothing else running. It
// is the least time any dispatch of an instant into asynq can take.
type floorResult struct {
	how      string
	tasks    int
	took     time.Duration
	redisCPU time.Duration
}

// enqueueScriptPath is baton's batch enqueue script (internal/handoff), read
// from the source tree: the bench module cannot import an internal package.
const enqueueScriptPath = "../internal/handoff/lua/enqueue.lua"

// runFloor measures, on a fresh redis-server each, N tasks written by
// asynq's own client (one task a call, 100 goroutines) and by baton's batch
// enqueue script (128 tasks a call, 4 goroutines), with payloads of the
// size baton's runtime schedule tasks have.
func runFloor(ctx context.Context, n int) ([]floorResult, error) {
	src, err := os.ReadFile(enqueueScriptPath)
	if err != nil {
		return nil, fmt.Errorf("floor: baton's enqueue script (run from bench/): %w", err)
	}
	payload := []byte(strings.Repeat("x", 160)) // a signed runtime schedule payload's size
	ways := []struct {
		how string
		run func(ctx context.Context, rdb *redis.Client) error
	}{
		{"asynq Client.Enqueue (TaskID, Retention), 100 goroutines", func(ctx context.Context, rdb *redis.Client) error {
			c := asynq.NewClientFromRedisClient(rdb)
			return fanOut(ctx, 100, n, func(i int) error {
				_, err := c.EnqueueContext(ctx, asynq.NewTask("floor", payload), asynq.TaskID(floorTaskID(i)), asynq.Retention(time.Hour))
				return err
			})
		}},
		{"baton's batch enqueue script, 128 tasks a call, 4 goroutines", func(ctx context.Context, rdb *redis.Client) error {
			s := redis.NewScript(string(src))
			const chunk = 128
			return fanOut(ctx, 4, (n+chunk-1)/chunk, func(k int) error {
				keys := []string{"asynq:{default}:pending"}
				args := []any{time.Now().UnixNano()}
				for i := k * chunk; i < min((k+1)*chunk, n); i++ {
					id := floorTaskID(i)
					keys = append(keys, "asynq:{default}:t:"+id)
					args = append(args, id, append([]byte("floor-message:"), payload...))
				}
				return s.Run(ctx, rdb, keys, args...).Err()
			})
		}},
	}
	var out []floorResult
	for _, w := range ways {
		srv, err := redistest.Start()
		if err != nil {
			return nil, err
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 110})
		node := []redisNode{{rdb: rdb}}
		before, err := redisCPUs(node)
		if err == nil {
			start := time.Now()
			if err = w.run(ctx, rdb); err == nil {
				r := floorResult{how: w.how, tasks: n, took: time.Since(start)}
				var after []time.Duration
				if after, err = redisCPUs(node); err == nil {
					r.redisCPU = after[0] - before[0]
					out = append(out, r)
					logf("floor: %s: %d tasks in %v, Redis CPU %v", w.how, n, r.took.Round(time.Millisecond), r.redisCPU.Round(time.Millisecond))
				}
			}
		}
		_ = rdb.Close()
		_ = srv.Close()
		if err != nil {
			return nil, fmt.Errorf("floor: %s: %w", w.how, err)
		}
	}
	return out, nil
}

func floorTaskID(i int) string { return fmt.Sprintf("@%s@2026-01-01T00:00:00Z", schedID(i)) }

// fanOut calls f(0..n-1) from g goroutines and returns the first error.
func fanOut(ctx context.Context, g, n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i, stop := next, next >= n || first != nil || ctx.Err() != nil
				next++
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// renderFloor is the report's section on the floor.
func renderFloor(rs []floorResult) string {
	if len(rs) == 0 {
		return ""
	}
	var w strings.Builder
	w.WriteString("## The floor: writing the tasks alone\n\n")
	w.WriteString("What writing N tasks into one asynq queue costs an idle redis-server (a fresh one each), with nothing else running: no claim, no commit, no worker. No dispatch of an instant into asynq can be faster on this machine.\n\n")
	for _, r := range rs {
		fmt.Fprintf(&w, "- %s: %d tasks in %.2f s, Redis CPU %.2f s (%.1f µs a task)\n", r.how, r.tasks, r.took.Seconds(), r.redisCPU.Seconds(),
			float64(r.redisCPU.Microseconds())/float64(r.tasks))
	}
	w.WriteString("\n")
	return w.String()
}
