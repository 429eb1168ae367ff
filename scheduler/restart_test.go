package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Tick claims run on the lock library's quorum machinery, so the lock
// masters' restart schedules hold for them too. In a quorum of three, while
// three replicas claim: A saves a snapshot; ticks are claimed on {A, B}
// only (C cut off), so A's and B's fencing counters move on while C's stays
// where A's snapshot has it; A crashes and comes back from the snapshot;
// claims reach {A, C} only, whose counters agree on the old value. Then B
// restarts empty. No tick may be dispatched twice and no dispatch fence may
// repeat or go below one issued before a restart.
func TestClaimsSurviveMasterRestarts(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var proxies []*redistest.Proxy
	for _, s := range servers {
		proxies = append(proxies, redistest.NewTestProxy(t, s.Addr()))
	}
	viaProxies := func() []*redis.Client {
		var out []*redis.Client
		for i, s := range servers {
			out = append(out, s.TestClient(t, func(o *redis.Options) { o.Addr = proxies[i].Addr() }))
		}
		return out
	}
	// a first deployment marks the masters
	deployFresh(t, servers)

	// real time throughout: a restarted master's votes depend on when ticks
	// were due by its clock, and the scheduler's retries on the clock too
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "r", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}}
	for i := range 3 {
		// production clients: no fresh-deployment opt-in
		locks, err := locking.NewQuorum(universal(viaProxies()), locking.WithRestartQuarantine(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		startWith(t, locks, jobs, rec, scheduler.WithReplica(fmt.Sprintf("r%d", i)), scheduler.WithFollowerDelay(0))
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var restarts []int          // dispatches made before each restart
	time.Sleep(2 * time.Second) // real time: ticks fall due by Redis TIME and are claimed on all three before A's snapshot
	must(servers[0].Save())
	must(proxies[2].Cut())      // claims on {A, B}
	time.Sleep(3 * time.Second) // real time: ticks falling due by Redis TIME are claimed on {A, B} only, after the snapshot
	restarts = append(restarts, len(rec.dispatched()))
	must(servers[0].RestartFromSnapshot())
	must(proxies[2].Restore())
	must(proxies[1].Cut())      // claims on {A, C}
	time.Sleep(4 * time.Second) // real time: A waits out its 2s quarantine by Redis's clock; claims reach {A, C}
	must(proxies[1].Restore())
	restarts = append(restarts, len(rec.dispatched()))
	must(servers[1].Restart())
	time.Sleep(4 * time.Second) // real time: B waits out its 2s quarantine by Redis's clock; ticks go on
	if n := len(rec.dispatched()); n <= restarts[1] {
		t.Fatalf("nothing dispatched after the last restart (%d in all)", n)
	}
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Fatalf("tick %s dispatched %d times", id, len(ts))
		}
	}
	// fences are issued in claim order, which concurrent replicas may make
	// differ a little from tick order; what must hold is that no fence
	// repeats and none issued after a restart is below one issued before
	order := rec.dispatched()
	seen := map[int64]time.Time{}
	for _, tk := range order {
		if at, dup := seen[tk.Fence]; dup {
			t.Fatalf("fence %d issued to ticks %v and %v", tk.Fence, at, tk.At)
		}
		seen[tk.Fence] = tk.At
	}
	for _, n := range restarts {
		var high int64
		for _, tk := range order[:n] {
			high = max(high, tk.Fence)
		}
		for _, tk := range order[n:] {
			if tk.Fence <= high {
				t.Fatalf("tick %v claimed after a restart got fence %d, not above %d issued before it", tk.At, tk.Fence, high)
			}
		}
	}
	t.Logf("%d ticks dispatched once each; fences above every restart", len(order))
}

func clients(t *testing.T, servers []*redistest.Server) []*redis.Client {
	var out []*redis.Client
	for _, s := range servers {
		out = append(out, s.TestClient(t))
	}
	return out
}

func universal(rdbs []*redis.Client) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		out[i] = r
	}
	return out
}

// deployFresh marks brand-new servers as a first deployment would.
func deployFresh(t *testing.T, servers []*redistest.Server) {
	t.Helper()
	first, err := locking.NewQuorum(universal(clients(t, servers)), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
}
