package locking_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// BenchmarkTryLockRelease measures one uncontended lock+unlock pair; it is
// for profiling (go test -bench . -cpuprofile), the comparison with other
// libraries lives in bench/.
func BenchmarkTryLockRelease(b *testing.B) {
	s, err := redistest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rdb := s.Client(func(o *redis.Options) { o.PoolSize = 64 })
	defer rdb.Close()
	c := newClient(&testing.T{}, []*redis.Client{rdb})
	defer c.Close()
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench" + strconv.FormatInt(time.Now().UnixNano(), 36)
		for pb.Next() {
			l, err := c.TryLock(ctx, key, 8*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
