package main

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/bench/internal/cpu"
	"github.com/batonhq/baton/bench/internal/redisinfo"
)

// serverMeter reads one redis-server's own cost: its process CPU time and
// the calls INFO commandstats counts (a script's EVALSHA and every command it
// runs). It talks over a client of its own, outside every library's counter.
type serverMeter struct {
	rdb *redis.Client
	pid int
}

func newServerMeter(addr string) (*serverMeter, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	pid, err := redisinfo.PID(rdb)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis-server at %s: %w", addr, err)
	}
	return &serverMeter{rdb: rdb, pid: pid}, nil
}

func (m *serverMeter) close() { _ = m.rdb.Close() }

// serverReading is what the first n servers had spent at one moment.
type serverReading struct {
	cpu    time.Duration
	calls  int64
	client time.Duration // this process's CPU time: the libraries' own cost
}

// read sums the first n servers' CPU and calls. The INFO calls of the
// reading itself are left out (they count under "info").
func (b *bench) read(n int) (serverReading, error) {
	r := serverReading{client: cpu.Self()}
	for _, m := range b.servers[:n] {
		stats, err := redisinfo.CommandStats(m.rdb)
		if err != nil {
			return r, err
		}
		for name, c := range stats {
			if name != "info" {
				r.calls += c
			}
		}
		r.cpu += cpu.Of(m.pid)
	}
	return r, nil
}

// addServerCost records the servers' CPU (µs) and calls per pair since
// before, and this process's CPU per pair (the library's client side; on a
// machine of few cores it competes with Redis for them).
func (b *bench) addServerCost(cell, lib string, before serverReading, pairs int64) error {
	n := 1
	if _, err := fmt.Sscanf(cell, "B/%d", &n); err != nil {
		n = 1
	}
	after, err := b.read(n)
	if err != nil {
		return err
	}
	if pairs == 0 {
		return nil
	}
	b.res.add(cell, lib, "cpu", float64((after.cpu-before.cpu).Microseconds())/float64(pairs))
	b.res.add(cell, lib, "calls", float64(after.calls-before.calls)/float64(pairs))
	b.res.add(cell, lib, "client", float64((after.client-before.client).Microseconds())/float64(pairs))
	return nil
}
