package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// snapshot is what INFO says of one redis-server at one moment.
type snapshot struct {
	calls map[string]int64 // commandstats calls by command (script-run commands included)
	cpu   time.Duration    // used_cpu_user + used_cpu_sys
	reads int64            // total_reads_processed: reads from clients, about one per round trip
}

// usage is the difference of two snapshots.
type usage struct {
	calls map[string]int64
	cpu   time.Duration
	reads int64
}

func (u usage) total() int64 {
	var n int64
	for _, c := range u.calls {
		n += c
	}
	return n
}

func (u usage) scripts() int64 {
	return u.calls["evalsha"] + u.calls["eval"] + u.calls["evalsha_ro"] + u.calls["eval_ro"] + u.calls["fcall"]
}

// minus subtracts the idle usage o, scaled by f (the ratio of the windows).
func (u usage) minus(o usage, f float64) usage {
	out := usage{calls: map[string]int64{}, cpu: u.cpu - time.Duration(float64(o.cpu)*f), reads: u.reads - int64(float64(o.reads)*f+0.5)}
	for k, v := range u.calls {
		out.calls[k] = v
	}
	for k, v := range o.calls {
		out.calls[k] -= int64(float64(v)*f + 0.5)
	}
	return out
}

// server is one redis-server of a cell with its role.
type server struct {
	role string
	srv  *redistest.Server
	rdb  *redis.Client
	idle usage
	busy usage
}

// net is busy less idle (scaled to the busy window).
func (s *server) net(f float64) usage { return s.busy.minus(s.idle, f) }

func (s *server) perTickCommands(ticks int64, f float64) string {
	if ticks <= 0 {
		return "no ticks"
	}
	u := s.net(f)
	type kv struct {
		k string
		v float64
	}
	var out []kv
	for k, v := range u.calls {
		per := float64(v) / float64(ticks)
		if per >= 0.05 {
			out = append(out, kv{k, per})
		}
	}
	slices.SortFunc(out, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for _, p := range out {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.k, p.v))
	}
	if len(parts) == 0 {
		return "nothing per tick"
	}
	return fmt.Sprintf("%.1f calls, %.0f µs: ", float64(u.total())/float64(ticks), float64(u.cpu.Microseconds())/float64(ticks)) + strings.Join(parts, ", ")
}

func take(ctx context.Context, rdb *redis.Client) (snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "commandstats", "cpu", "stats").Result()
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{calls: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(info))
	var user, sys float64
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(l, "used_cpu_user:"); ok {
			user, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(l, "used_cpu_sys:"); ok {
			sys, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(l, "total_reads_processed:"); ok {
			s.reads, _ = strconv.ParseInt(v, 10, 64)
		}
		rest, ok := strings.CutPrefix(l, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if name == "info" {
			continue // the benchmark's own reads
		}
		for _, kv := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.calls[name] = n
			}
		}
	}
	s.cpu = time.Duration((user + sys) * float64(time.Second))
	return s, nil
}

func diff(a, b snapshot) usage {
	u := usage{calls: map[string]int64{}, cpu: b.cpu - a.cpu, reads: b.reads - a.reads}
	for k, v := range b.calls {
		if d := v - a.calls[k]; d != 0 {
			u.calls[k] = d
		}
	}
	return u
}

// measure snapshots every server, waits d and snapshots again.
func measure(ctx context.Context, servers []*server, d time.Duration) ([]usage, error) {
	before := make([]snapshot, len(servers))
	for i, s := range servers {
		var err error
		if before[i], err = take(ctx, s.rdb); err != nil {
			return nil, fmt.Errorf("%s: INFO: %w", s.role, err)
		}
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	out := make([]usage, len(servers))
	for i, s := range servers {
		after, err := take(ctx, s.rdb)
		if err != nil {
			return nil, fmt.Errorf("%s: INFO: %w", s.role, err)
		}
		out[i] = diff(before[i], after)
	}
	return out, nil
}

// startServers starts the queue Redis and, with masters > 0, that many
// lock masters apart from it.
func startServers(masters int) ([]*server, error) {
	var out []*server
	add := func(role string) error {
		srv, err := redistest.Start()
		if err != nil {
			closeServers(out)
			return err
		}
		out = append(out, &server{role: role, srv: srv, rdb: redis.NewClient(&redis.Options{Addr: srv.Addr()})})
		return nil
	}
	if err := add("queue Redis (and lock master)"); err != nil {
		return nil, err
	}
	if masters > 0 {
		out[0].role = "queue Redis"
		for i := range masters {
			if err := add(fmt.Sprintf("lock master %d", i+1)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func closeServers(ss []*server) {
	for _, s := range ss {
		_ = s.rdb.Close()
		_ = s.srv.Close()
	}
}

func redisVersion() string {
	bin, err := redistest.Binary()
	if err != nil {
		return "redis-server: not found"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "redis-server: " + err.Error()
	}
	if m := regexp.MustCompile(`v=(\S+)`).FindSubmatch(out); m != nil {
		return fmt.Sprintf("redis-server %s, started by the command on free loopback ports, persistence off", m[1])
	}
	return strings.TrimSpace(string(out))
}
