package redistest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ctx returns a context bounded well above the clients' own timeouts.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func TestStartPing(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:PORT", s.Addr())
	}
	if !s.Running() {
		t.Fatal("Running() = false after Start")
	}
	c := s.TestClient(t)
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	save, err := c.ConfigGet(ctx(t), "save").Result()
	if err != nil || save["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", save, err)
	}
}

func TestStartWithArgs(t *testing.T) {
	t.Parallel()
	s := redistest.New(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	got, err := s.TestClient(t).ConfigGet(ctx(t), "maxmemory-policy").Result()
	if err != nil || got["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("maxmemory-policy = %v, %v", got, err)
	}
}

func TestStartBadArgsReportsLog(t *testing.T) {
	t.Parallel()
	s, err := redistest.Start(redistest.WithArgs("--no-such-directive", "x"))
	if err == nil {
		_ = s.Close()
		t.Fatal("Start with a bad directive succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks redis-server's log tail: %v", err)
	}
}

func TestBinaryEnvOverride(t *testing.T) {
	t.Setenv(redistest.EnvBinary, "/nonexistent/redis-server")
	if _, err := redistest.Binary(); err == nil || !strings.Contains(err.Error(), redistest.EnvBinary) {
		t.Fatalf("Binary() error = %v, want one naming $%s", err, redistest.EnvBinary)
	}
}

func TestKillRestartSameAddrEmptyData(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	addr := s.Addr()
	c := s.TestClient(t)
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if err := c.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("PING succeeded against a killed server")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr || !s.Running() {
		t.Fatalf("after Restart: Addr %q (was %q), Running %v", s.Addr(), addr, s.Running())
	}
	c2 := s.TestClient(t)
	if err := c2.Get(ctx(t), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %v, want redis.Nil (empty data)", err)
	}
}

func TestStopAndCloseIdempotent(t *testing.T) {
	t.Parallel()
	s, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := s.Close(); err != nil { // closing a paused server
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s.Running() {
		t.Fatal("Running() = true after Close")
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	c := s.TestClient(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	start := time.Now()
	err := c.Ping(ctx(t)).Err()
	if !isTimeout(err) {
		t.Fatalf("PING on paused server = %v, want a timeout", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("timed out after %v, before the 200ms read timeout", el)
	}
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

// viaProxy returns a client of s that connects through p.
func viaProxy(t *testing.T, s *redistest.Server, p *redistest.Proxy, opts ...func(*redis.Options)) *redis.Client {
	return s.TestClient(t, append([]func(*redis.Options){func(o *redis.Options) { o.Addr = p.Addr() }}, opts...)...)
}

func timePing(t *testing.T, c *redis.Client) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	return time.Since(start)
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, upstream := range []bool{false, true} {
		p := redistest.NewTestProxy(t, s.Addr())
		c := viaProxy(t, s, p)
		timePing(t, c) // connect before adding latency
		const lat = 100 * time.Millisecond
		if err := p.AddLatency(lat, upstream); err != nil {
			t.Fatalf("AddLatency(upstream=%v): %v", upstream, err)
		}
		if el := timePing(t, c); el <= lat {
			t.Fatalf("upstream=%v: PING took %v, want > %v", upstream, el, lat)
		}
		if err := p.Restore(); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if err := c.Ping(ctx(t)).Err(); err != nil {
			t.Fatalf("PING after removing latency: %v", err)
		}
	}
}

func TestProxyBlackhole(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	c := viaProxy(t, s, p, func(o *redis.Options) {
		o.DialTimeout = 200 * time.Millisecond
		o.ReadTimeout = 200 * time.Millisecond
	})
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := p.Blackhole(); err != nil {
		t.Fatalf("Blackhole: %v", err)
	}
	if err := c.Get(ctx(t), "k").Err(); !isTimeout(err) {
		t.Fatalf("GET through blackhole = %v, want a timeout", err)
	}
	// A fresh connection is accepted but hangs too.
	c2 := viaProxy(t, s, p, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	if err := c2.Ping(ctx(t)).Err(); !isTimeout(err) {
		t.Fatalf("PING on new connection through blackhole = %v, want a timeout", err)
	}
	if err := p.Restore(); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, err := c.Get(ctx(t), "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Restore = %q, %v", got, err)
	}
}

func TestProxyCutRestore(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	addr := p.Addr()
	c := viaProxy(t, s, p)
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := p.Cut(); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	if err := c.Get(ctx(t), "k").Err(); err == nil {
		t.Fatal("GET through a cut proxy succeeded")
	}
	// A new connection does not reach the server. (Not "the dial fails": the
	// cut frees the port, and until Restore another test's listener, or a
	// dial that the kernel gives that very port as its own, can answer it.)
	c2 := viaProxy(t, s, p, func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialTimeout, o.ReadTimeout = time.Second, time.Second
	})
	if got, err := c2.Get(ctx(t), "k").Result(); err == nil && got == "v" {
		t.Fatal("a new connection through a cut proxy reached the server")
	}
	if err := p.Restore(); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if p.Addr() != addr {
		t.Fatalf("Addr changed across Cut/Restore: %q -> %q", addr, p.Addr())
	}
	if got, err := c.Get(ctx(t), "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Restore = %q, %v", got, err)
	}
}

func TestNewN(t *testing.T) {
	t.Parallel()
	servers := redistest.NewN(t, 3)
	if len(servers) != 3 {
		t.Fatalf("NewN returned %d servers", len(servers))
	}
	seen := map[string]bool{}
	for i, s := range servers {
		if seen[s.Addr()] {
			t.Fatalf("duplicate address %s", s.Addr())
		}
		seen[s.Addr()] = true
		c := s.TestClient(t)
		if err := c.Set(ctx(t), "id", i, 0).Err(); err != nil {
			t.Fatalf("server %d SET: %v", i, err)
		}
	}
	for i, s := range servers {
		if got, err := s.TestClient(t).Get(ctx(t), "id").Int(); err != nil || got != i {
			t.Fatalf("server %d: id = %d, %v (servers share data?)", i, got, err)
		}
	}
}

func TestProxyCutDropsDelayedData(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	c := viaProxy(t, s, p)
	big := strings.Repeat("x", 256<<10) // several chunks in flight at once
	if err := c.Set(ctx(t), "big", big, 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := p.AddLatency(300*time.Millisecond, false); err != nil {
		t.Fatalf("AddLatency: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		pl := c.Pipeline()
		for range 8 {
			pl.Get(ctx(t), "big")
		}
		_, err := pl.Exec(ctx(t))
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // real time: the replies sit in the proxy's 300ms latency; Cut comes inside it
	if err := p.Cut(); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("replies delayed past Cut were delivered")
	}
	if err := p.Restore(); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, err := c.Get(ctx(t), "big").Result(); err != nil || got != big {
		t.Fatalf("GET after Restore: len %d, %v", len(got), err)
	}
}
