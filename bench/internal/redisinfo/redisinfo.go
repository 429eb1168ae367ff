// Package redisinfo reads what the benchmarks need from INFO.
package redisinfo

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// PID is the process id of the redis-server rdb talks to (INFO server).
func PID(rdb *redis.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no process_id in INFO server")
}

// CommandStats is INFO commandstats: calls per command. Redis 7 also counts
// the commands a Lua script runs, under their own names.
func CommandStats(rdb *redis.Client) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		l := sc.Text()
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out, nil
}
