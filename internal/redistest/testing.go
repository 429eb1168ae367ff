package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// New starts a redis-server for the test (see [Start]) and closes it in
// t.Cleanup. It calls t.Fatal if the server cannot start.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("redistest: close server %s: %v", s.Addr(), err)
		}
	})
	return s
}

// NewN starts n redis-servers in parallel, each with opts, and closes them in
// t.Cleanup. It calls t.Fatal if any fails to start.
func NewN(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = Start(opts...) })
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("redistest: close server %s: %v", s.Addr(), err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// TestClient is [Server.Client] plus t.Cleanup(client.Close).
func (s *Server) TestClient(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	c := s.Client(opts...)
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			t.Errorf("redistest: close client: %v", err)
		}
	})
	return c
}

// NewTestProxy is [NewProxy] plus t.Cleanup(Close); it calls t.Fatal if the
// proxy cannot start.
func NewTestProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := NewProxy(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("redistest: close proxy %s: %v", p.Addr(), err)
		}
	})
	return p
}

// NewTestClock is [NewClock] in t.TempDir(). A test without a C compiler is
// skipped, naming what is missing (`make test` installs gcc when root); one
// whose shim does not build fails with the compiler's output.
func NewTestClock(t testing.TB) *Clock {
	t.Helper()
	c, err := NewClock(t.TempDir())
	if errors.Is(err, ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CommandCalls reads the server's INFO commandstats: calls per command (a
// script's EVALSHA and, under their own names, the commands it runs). It
// calls t.Fatal if the server does not answer.
func CommandCalls(t testing.TB, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(v)
			}
		}
	}
	return out
}

// FreeAddr returns a loopback address whose port is free now (for a
// process the test starts that listens on it).
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}
