package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// A stepped clock moves the TIME and key expiry of the server started with
// it, at run time, and of no other.
func TestClockStepMovesOneServersTimeAndExpiry(t *testing.T) {
	clock := redistest.NewTestClock(t)
	stepped := redistest.New(t, redistest.WithClock(clock))
	plain := redistest.New(t)
	sc, pc := stepped.TestClient(t), plain.TestClient(t)
	offset := func(c interface {
		Time(ctx context.Context) *redis.TimeCmd
	}) time.Duration {
		t.Helper()
		now, err := c.Time(ctx(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(now)
	}
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -time.Second || d > time.Second {
			t.Errorf("%s: clock offset %v, want %v", what, got, want)
		}
	}
	near("stepped server before the step", offset(sc), 0)
	if err := sc.Set(ctx(t), "k", "v", 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clock.Step(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	near("stepped server after +30s", offset(sc), 30*time.Second)
	near("other server", offset(pc), 0)
	if n, err := sc.Exists(ctx(t), "k").Result(); err != nil || n != 0 {
		t.Errorf("a key with 20s left still exists %d times after a 30s step forward (%v)", n, err)
	}
	if err := clock.Step(-15 * time.Minute); err != nil {
		t.Fatal(err)
	}
	near("stepped server after -15m", offset(sc), 30*time.Second-15*time.Minute)
	if got := clock.Offset(); got != 30*time.Second-15*time.Minute {
		t.Errorf("Offset() = %v", got)
	}
}
