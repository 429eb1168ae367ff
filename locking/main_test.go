package locking_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// redisAddr is a redis-server shared by the examples.
var redisAddr string

// quiet drops go-redis's own log lines (failed dials while a test has a
// master down on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if spec := os.Getenv(holdEnv); spec != "" {
		os.Exit(holdUntilKilled(spec, os.Getenv(holdRedisEnv)))
	}
	s, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	code := m.Run()
	_ = s.Close()
	if code == 0 {
		if err := goleak.Find(redistest.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testCtx is a context bounded by the test's deadline or 30s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a locking client over the given go-redis clients, closed at cleanup.
func newClient(t *testing.T, rdbs []*redis.Client, opts ...locking.Option) *locking.Client {
	t.Helper()
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	// shared 2-core CI machines under -race answer slowly now and then: give
	// each master more time than the production default unless a test says.
	// Every test starts brand-new servers: they are a fresh deployment.
	c, err := locking.NewQuorum(ms, append([]locking.Option{locking.WithMasterTimeout(time.Second), locking.WithFreshDeployment()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clientsOf opens one go-redis client per server.
func clientsOf(t *testing.T, servers ...*redistest.Server) []*redis.Client {
	out := make([]*redis.Client, len(servers))
	for i, s := range servers {
		out[i] = s.TestClient(t)
	}
	return out
}

// through opens one go-redis client per proxy.
func through(t *testing.T, s *redistest.Server, p *redistest.Proxy) *redis.Client {
	return s.TestClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
}

// registered waits (at most 30s, as testCtx) until n waiters are registered
// for key: in the waiter set, or in the fair queue. A waiter registers in its
// first attempt, after it subscribed to the wake channel, so a release from
// then on wakes it.
func registered(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	ctx := testCtx(t)
	poll.Require(t, 30*time.Second, fmt.Sprintf("%d waiters registered on %q", n, key), func() bool {
		a, _ := rdb.ZCard(ctx, "baton:lock:{"+key+"}:w").Result()
		b, _ := rdb.LLen(ctx, "baton:lock:{"+key+"}:q").Result()
		return a+b >= n
	})
}

// waitDone waits for a lease to end, failing the test after d.
func waitDone(t *testing.T, l *locking.Lease, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("lease on %q still held after %v", l.Key(), d)
		return time.Time{}
	}
}
