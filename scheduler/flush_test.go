package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Schedule (G1, one master): the master has been up longer than the
// quarantine. Two replicas claim an @every 1s job; the preferred one claims
// and commits tick T; the master is FLUSHALLed (same process: the tick
// record and the marker go). The follower's claim finds the marker gone
// (-1), the master is repaired with BORN = its process start (read off
// uptime, long before T) and, being up longer than the quarantine, votes at
// once; the claim script sees no record and T is not before BORN + skew, so
// the follower owns T and dispatches it a second time.
func TestFlushedMasterNeverRedispatches(t *testing.T) {
	s := redistest.New(t)
	{
		deployFresh(t, []*redistest.Server{s})
	}
	const q = 2 * time.Second
	time.Sleep(q + 1500*time.Millisecond) // real time: Redis's uptime (lower bound) past q
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "f", Schedule: every(t, "@every 1s"), StartingDeadline: 10 * time.Second}}
	for i := range 2 {
		locks, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithRestartQuarantine(q))
		if err != nil {
			t.Fatal(err)
		}
		startWith(t, locks, jobs, rec, scheduler.WithReplica(fmt.Sprintf("r%d", i)),
			scheduler.WithFollowerDelay(600*time.Millisecond), scheduler.WithTickLeaseTTL(time.Second))
	}
	admin := s.TestClient(t)
	ctx := context.Background()
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		// flush 300ms after each whole second: after the preferred
		// replica's commit, before the follower's claim
		next := time.Now().Truncate(time.Second).Add(time.Second + 300*time.Millisecond)
		time.Sleep(time.Until(next)) // real time: ticks fall due by Redis TIME
		if err := admin.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // real time: the last tick's follower claim (600ms after it falls due by Redis TIME) goes out
	n := 0
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Errorf("G1: tick %s dispatched %d times (fences %d, %d)", id, len(ts), ts[0].Fence, ts[1].Fence)
		}
		n++
	}
	t.Logf("%d ticks dispatched", n)
}
