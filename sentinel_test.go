package baton_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// startSentinel runs a Redis Sentinel watching master as "m" (quorum 1,
// down after 1s) until the test ends, and returns its address.
func startSentinel(t *testing.T, master string) string {
	t.Helper()
	bin, err := redistest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	host, mport, _ := net.SplitHostPort(master)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\nsentinel monitor m %s %s 1\nsentinel down-after-milliseconds m 1000\nsentinel failover-timeout m 5000\n",
		port, host, mport)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := redis.NewSentinelClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { s.Close() })
	poll.Require(t, 10*time.Second, "the sentinel to know the master", func() bool {
		a, err := s.GetMasterAddrByName(context.Background(), "m").Result()
		return err == nil && len(a) == 2
	})
	return addr
}

// A queue Redis behind Sentinel, its master killed while a job ticks every
// second: after the failover the promoted replica keeps running the job's
// ticks. The promoted replica carries the old master's restart marker, so
// baton treats it as a restarted master and lets it grant nothing for
// locking.restart_quarantine (5s here; at least the longest lock ttl): the
// ticks of that moment are held and then claimed by the catch-up policy.
// What a failover can lose is what asynchronous replication loses: records
// written to the old master in its last moments (a tick may run twice then,
// and a held lock may pass to another holder: correctness-critical locks
// belong on independent masters, see the locking guide).
func TestSentinelFailoverKeepsTicking(t *testing.T) {
	t.Parallel()
	master := redistest.New(t)
	mhost, mport, _ := net.SplitHostPort(master.Addr())
	replica := redistest.New(t, redistest.WithArgs("--replicaof", mhost, mport))
	rc := replica.TestClient(t)
	poll.Require(t, 10*time.Second, "the replica in sync", func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	sentinel := startSentinel(t, master.Addr())
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis:
  sentinel: {master: m, addrs: [%q]}
locking: {fresh_deployment: true, restart_quarantine: 5s}
scheduler: {tick_lease_ttl: 2s}
namespace: sent
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    concurrency: allow
    lock_ttl: 2s
    handler: {name: beat}
`, sentinel)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[time.Time]int{}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		runs[run.Tick]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("sent-1"))
	count := func(after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for tk := range runs {
			if tk.After(after) {
				n++
			}
		}
		return n
	}
	poll.Require(t, 20*time.Second, "three ticks before the failover", func() bool { return count(time.Time{}) >= 3 })
	killed := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	s := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer s.Close()
	poll.Require(t, 20*time.Second, "the sentinel to promote the replica", func() bool {
		a, err := s.GetMasterAddrByName(context.Background(), "m").Result()
		return err == nil && len(a) == 2 && net.JoinHostPort(a[0], a[1]) == replica.Addr()
	})
	promoted := time.Now()
	poll.Require(t, 30*time.Second, "three ticks after the failover", func() bool { return count(promoted) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	for tk, n := range runs {
		if n > 1 && (tk.Before(killed.Add(-2*time.Second)) || tk.After(promoted.Add(2*time.Second))) {
			t.Errorf("tick %s ran %d times, outside the failover window", tk.Format(time.RFC3339), n)
		}
	}
	t.Logf("failover took %s (master killed -> replica promoted)", promoted.Sub(killed).Round(100*time.Millisecond))
}
