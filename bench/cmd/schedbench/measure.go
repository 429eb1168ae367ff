package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/bench/internal/redisinfo"

	"github.com/batonhq/baton/bench/internal/cpu"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook counting the commands a set of clients sends
// (ProcessHook and ProcessPipelineHook; every command of a pipeline counts)
// and the round trips (one per single command, one per pipeline). Connection
// handshakes (HELLO, CLIENT, AUTH, SELECT) are left out. Pipelines holding an
// EVALSHA with 4 or 5 keys are baton claim pipelines (claim.lua takes 4 keys,
// 5 in quorum mode; commit takes 2 and release 1).
type counter struct {
	cmds, trips, claimPipes, claimCmds atomic.Int64

	mu    sync.Mutex
	spans []span // claim and commit pipelines, at most maxSpans
}

// span is one claim or commit pipeline: when it was sent and answered.
type span struct {
	claim      bool // else commit
	n          int
	start, end time.Time
}

const maxSpans = 200000

func (c *counter) spansCopy() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

type counts struct{ cmds, trips, claimPipes, claimCmds int64 }

func (c *counter) snap() counts {
	return counts{c.cmds.Load(), c.trips.Load(), c.claimPipes.Load(), c.claimCmds.Load()}
}

func (a counts) sub(b counts) counts {
	return counts{a.cmds - b.cmds, a.trips - b.trips, a.claimPipes - b.claimPipes, a.claimCmds - b.claimCmds}
}

func countable(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return false
	}
	return true
}

// evalKeys is the number of keys of an EVALSHA, -1 for other commands.
func evalKeys(cmd redis.Cmder) int {
	if cmd.Name() != "evalsha" {
		return -1
	}
	args := cmd.Args()
	if len(args) < 3 {
		return -1
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil {
		return -1
	}
	return n
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if countable(cmd) {
			c.cmds.Add(1)
			c.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n, claims, commits int64
		for _, cmd := range cmds {
			if countable(cmd) {
				n++
			}
			switch evalKeys(cmd) {
			case 4, 5:
				claims++
			case 2:
				commits++
			}
		}
		if n > 0 {
			c.cmds.Add(n)
			c.trips.Add(1)
		}
		if claims > 0 {
			c.claimPipes.Add(1)
			c.claimCmds.Add(claims)
		}
		if claims == 0 && commits == 0 {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		sp := span{claim: claims > 0, n: int(claims + commits), start: start, end: time.Now()}
		c.mu.Lock()
		if len(c.spans) < maxSpans {
			c.spans = append(c.spans, sp)
		}
		c.mu.Unlock()
		return err
	}
}

// newClient is a go-redis client with defaults (PoolSize 10 x GOMAXPROCS)
// plus ContextTimeoutEnabled, counted by c (nil: not counted).
func newClient(addr string, c *counter) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	if c != nil {
		rdb.AddHook(c)
	}
	return rdb
}

// selfCPU is the CPU time (user + system) of this process so far.
func selfCPU() time.Duration { return cpu.Self() }

// procCPU is another process's CPU time (see cpu.Of).
func procCPU(pid int) time.Duration { return cpu.Of(pid) }

// snapshot is everything read at a window boundary.
type snapshot struct {
	at        time.Time
	self      time.Duration
	redis     time.Duration
	worker    time.Duration
	workerCmd int64
	stats     map[string]int64
	ctrs      []counts
}

func (e *env) snapshot(w *workerProc, ctrs ...*counter) (snapshot, error) {
	s := snapshot{at: time.Now(), self: selfCPU(), redis: procCPU(e.redisPID)}
	if w != nil {
		s.worker = procCPU(w.pid())
		s.workerCmd = w.cmds()
	}
	for _, c := range ctrs {
		s.ctrs = append(s.ctrs, c.snap())
	}
	var err error
	s.stats, err = redisinfo.CommandStats(e.admin)
	return s, err
}

// window is the difference between two snapshots.
type window struct {
	wall                       time.Duration
	self, redis, worker        time.Duration
	workerCmds                 int64
	serverCalls, serverEvals   int64 // commandstats: all calls; eval + evalsha calls
	serverInfo                 int64 // our own INFO calls, subtracted from serverCalls
	ctrs                       []counts
	serverByCmd                map[string]int64
	selfPct, redisPct, workPct float64
}

func diff(a, b snapshot) window {
	w := window{wall: b.at.Sub(a.at), self: b.self - a.self, redis: b.redis - a.redis, worker: b.worker - a.worker,
		workerCmds: b.workerCmd - a.workerCmd, serverByCmd: map[string]int64{}}
	for k, v := range b.stats {
		d := v - a.stats[k]
		if d == 0 {
			continue
		}
		w.serverByCmd[k] = d
		switch k {
		case "info":
			w.serverInfo += d
			continue
		case "eval", "evalsha":
			w.serverEvals += d
		}
		w.serverCalls += d
	}
	for i := range b.ctrs {
		w.ctrs = append(w.ctrs, b.ctrs[i].sub(a.ctrs[i]))
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / w.wall.Seconds() }
	w.selfPct, w.redisPct, w.workPct = pct(w.self), pct(w.redis), pct(w.worker)
	return w
}
