package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// The Redis Cluster cell's layout: three primaries on this machine, the
// runtime schedules in 16 shards, each queue in 12 lanes (4 a primary).
const (
	clusterPrimaries = 3
	clusterShards    = 16
	clusterLanes     = 12
)

// workerLanes is worker.lanes of baton's cell.
func workerLanes(cluster bool) int {
	if cluster {
		return clusterLanes
	}
	return 1
}

// redisNode is one redis-server of a cell with an admin client on it.
type redisNode struct {
	srv *redistest.Server
	rdb *redis.Client
}

func (n redisNode) close() error {
	_ = n.rdb.Close()
	return n.srv.Close()
}

// batonRedis starts baton's Redis: one redis-server, or a Redis Cluster of
// clusterPrimaries primaries (slots split evenly, no replicas), and
// returns its nodes and the config's redis section (with schedules.shards
// for a Cluster; workerLanes gives worker.lanes).
func batonRedis(cluster bool) ([]redisNode, string, error) {
	if !cluster {
		srv, err := redistest.Start()
		if err != nil {
			return nil, "", err
		}
		n := redisNode{srv, redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})}
		logf("baton: redis-server %s", srv.Addr())
		return []redisNode{n}, fmt.Sprintf(`redis: {url: "redis://%s/0"}`, srv.Addr()), nil
	}
	var nodes []redisNode
	fail := func(err error) ([]redisNode, string, error) {
		for _, n := range nodes {
			_ = n.close()
		}
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for i := range clusterPrimaries {
		srv, err := redistest.Start(redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
		if err != nil {
			return fail(err)
		}
		n := redisNode{srv, redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})}
		nodes = append(nodes, n)
		lo, hi := i*16384/clusterPrimaries, (i+1)*16384/clusterPrimaries-1
		if err := n.rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fail(fmt.Errorf("cluster node %s: %w", srv.Addr(), err))
		}
		if i > 0 {
			host, port, _ := strings.Cut(nodes[0].srv.Addr(), ":")
			if err := n.rdb.ClusterMeet(ctx, host, port).Err(); err != nil {
				return fail(err)
			}
		}
		addrs = append(addrs, strconv.Quote(srv.Addr()))
	}
	for {
		ok := true
		for _, n := range nodes {
			info, err := n.rdb.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			break
		}
		if ctx.Err() != nil {
			return fail(fmt.Errorf("the Redis Cluster did not come up within 30s"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("baton: Redis Cluster of %d primaries: %s", clusterPrimaries, strings.Join(addrs, ", "))
	return nodes, fmt.Sprintf("redis: {cluster: {addrs: [%s]}}\nschedules: {shards: %d}", strings.Join(addrs, ", "), clusterShards), nil
}

// usedMemoryAll sums used_memory over nodes.
func usedMemoryAll(ctx context.Context, nodes []redisNode) (int64, error) {
	var sum int64
	for _, n := range nodes {
		m, err := usedMemory(ctx, n.rdb)
		if err != nil {
			return 0, err
		}
		sum += m
	}
	return sum, nil
}

// redisCPUs reads each node's CPU time (INFO cpu: used_cpu_user + sys).
func redisCPUs(nodes []redisNode) ([]time.Duration, error) {
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := n.rdb.Info(ctx, "cpu").Result()
		cancel()
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(info, "\n") {
			l = strings.TrimSpace(l)
			for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, ok := strings.CutPrefix(l, f); ok {
					s, _ := strconv.ParseFloat(v, 64)
					out[i] += time.Duration(s * float64(time.Second))
				}
			}
		}
	}
	return out, nil
}

// redisCPUNote tells the Redis CPU the instants took over measured (from
// before, after each node's), less each node's idle rate (idleBefore,
// idleAfter over idle), per tick, and each node's share: the busiest's
// predicts how far more machines carry it.
func redisCPUNote(before, after, idleBefore, idleAfter []time.Duration, idle, measured time.Duration, ticks int) string {
	var total, idleTotal time.Duration
	shares := make([]time.Duration, len(before))
	for i := range before {
		rest := time.Duration(float64(idleAfter[i]-idleBefore[i]) * measured.Seconds() / idle.Seconds())
		shares[i] = max(after[i]-before[i]-rest, 0)
		total += shares[i]
		idleTotal += rest
	}
	s := fmt.Sprintf("Redis CPU for the measured instants and their runs (%.0f s), idle cost subtracted (%.1f s of it, measured for %.0f s before): %.1f s, %.0f µs per tick",
		measured.Seconds(), idleTotal.Seconds(), idle.Seconds(), total.Seconds(), float64(total.Microseconds())/float64(max(ticks, 1)))
	if len(shares) > 1 {
		var parts []string
		busiest := time.Duration(0)
		for _, d := range shares {
			parts = append(parts, fmt.Sprintf("%.0f %%", 100*d.Seconds()/total.Seconds()))
			busiest = max(busiest, d)
		}
		s += fmt.Sprintf("; by primary %s (the busiest %.0f %%)", strings.Join(parts, ", "), 100*busiest.Seconds()/total.Seconds())
	}
	return s
}

// cmdStat is one command's INFO commandstats: calls and usec.
type cmdStat struct{ calls, usec int64 }

// commandStats sums INFO commandstats over nodes.
func commandStats(nodes []redisNode) (map[string]cmdStat, error) {
	out := map[string]cmdStat{}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := n.rdb.Info(ctx, "commandstats").Result()
		cancel()
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":")
			if !ok || !strings.HasPrefix(strings.TrimSpace(l), "cmdstat_") {
				continue
			}
			st := out[name]
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				x, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					st.calls += int64(x)
				case "usec":
					st.usec += int64(x)
				}
			}
			out[name] = st
		}
	}
	return out, nil
}

// commandNote tells the calls per tick between before and after, and the
// commands that took the most of Redis's command time (usec, which for a
// script counts its commands too).
func commandNote(before, after map[string]cmdStat, ticks int) string {
	type row struct {
		name        string
		calls, usec int64
	}
	var rows []row
	var calls int64
	for name, a := range after {
		b := before[name]
		r := row{name, a.calls - b.calls, a.usec - b.usec}
		if r.calls <= 0 {
			continue
		}
		calls += r.calls
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.usec, a.usec) })
	var parts []string
	for _, r := range rows[:min(len(rows), 10)] {
		parts = append(parts, fmt.Sprintf("%s %.2f calls %.0f µs", r.name, float64(r.calls)/float64(ticks), float64(r.usec)/float64(ticks)))
	}
	return fmt.Sprintf("Redis calls per tick (commandstats, scripts' commands included, idle not subtracted): %.1f; by command time: %s",
		float64(calls)/float64(max(ticks, 1)), strings.Join(parts, ", "))
}
