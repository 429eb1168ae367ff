package histcheck

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.GoleakOptions()...) }

// at is a point of a made-up history, ms after its start.
func (h *History) at(ms int) time.Time { return h.start.Add(time.Duration(ms) * time.Millisecond) }

func violation(t *testing.T, err error, rule string) *Violation {
	t.Helper()
	var v *Violation
	if !errors.As(err, &v) || v.Rule != rule {
		t.Fatalf("Check = %v, want a %q violation", err, rule)
	}
	return v
}

// Two holders believing they held one key at once: reported with both
// histories side by side, each on its own side.
func TestOverlapIsReportedSideBySide(t *testing.T) {
	h := New()
	a := h.Acquired("replica-a", "invoices", false, 7, h.at(0), h.at(1), h.at(100))
	b := h.Acquired("replica-b", "invoices", false, 8, h.at(50), h.at(60), h.at(160))
	a.Ended(h.at(90), time.Time{}, "released")
	b.Ended(h.at(120), time.Time{}, "released")
	v := violation(t, h.Check(), "overlap")
	out := v.Error()
	for _, want := range []string{"replica-a (fence 7)", "replica-b (fence 8)", "holds invoices, fence 7", "| holds invoices, fence 8", "ends: released"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// a holder frozen past its deadline believed only up to the deadline
	h = New()
	a = h.Acquired("frozen", "k", false, 1, h.at(0), h.at(0), h.at(100))
	a.Ended(h.at(500), time.Time{}, "noticed on resume")
	h.Acquired("next", "k", false, 2, h.at(150), h.at(160), h.at(300)).Ended(h.at(200), time.Time{}, "released")
	if err := h.Check(); err != nil {
		t.Errorf("a holder that believed only up to its deadline: %v", err)
	}
	// shared leases overlap each other, not an exclusive one
	h = New()
	h.Acquired("r1", "doc", true, 1, h.at(0), h.at(0), h.at(100))
	h.Acquired("r2", "doc", true, 2, h.at(10), h.at(10), h.at(100))
	if err := h.Check(); err != nil {
		t.Errorf("two readers: %v", err)
	}
	h.Acquired("w", "doc", false, 3, h.at(20), h.at(50), h.at(150))
	violation(t, h.Check(), "overlap")
}

func TestFenceOrderAndStaleWrites(t *testing.T) {
	h := New()
	h.Acquired("a", "k", false, 9, h.at(0), h.at(0), h.at(50)).Ended(h.at(40), time.Time{}, "released")
	h.Acquired("b", "k", false, 5, h.at(60), h.at(60), h.at(100))
	violation(t, h.Check(), "fence order")

	h = New()
	s := h.Store()
	h.Acquired("a", "k", false, 1, h.at(0), h.at(0), h.at(50))
	h.Acquired("b", "k", false, 2, h.at(60), h.at(60), h.at(100))
	if !s.Write("b", "k", 2, h.at(70)) || s.Write("a", "k", 1, h.at(40)) {
		t.Fatal("the store must take fence 2 and refuse the stale fence 1")
	}
	if err := h.Check(); err != nil {
		t.Fatalf("a refused stale write is no violation: %v", err)
	}
	// a store that did not check fences
	h.writes = append(h.writes, Write{Client: "a", Key: "k", Fence: 1, At: h.at(80), Accepted: true})
	violation(t, h.Check(), "write outside the lease")
	h.writes[len(h.writes)-1].At = h.at(45)
	h.leases[0].Deadline = h.at(90)
	h.leases[0].End = h.at(90)
	h.leases[1].Acquired = h.at(95)
	h.writes[0].At = h.at(20) // b's fence-2 write moved before a's
	h.leases[1].Acquired, h.leases[1].Asked = h.at(10), h.at(10)
	violation(t, h.Check(), "overlap")
}

func TestTicksAndRuns(t *testing.T) {
	tick := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	h := New()
	h.Ticked(Tick{Job: "report", Tick: tick, Event: "expected"})
	h.Ticked(Tick{Job: "report", Tick: tick, Event: "dispatched", Replica: "r1"})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	h.Ticked(Tick{Job: "report", Tick: tick, Event: "dispatched", Replica: "r2"})
	v := violation(t, h.Check(), "tick dispatched twice")
	if !strings.Contains(v.Error(), "r1") || !strings.Contains(v.Error(), "r2") {
		t.Errorf("report names neither replica:\n%v", v)
	}
	if c := h.Counts(); c.Duplicated != 1 || c.Dispatches != 2 || c.Dispatched != 1 || c.Expected != 1 {
		t.Errorf("counts %+v", c)
	}

	h = New()
	h.Ticked(Tick{Job: "report", Tick: tick, Event: "expected"})
	violation(t, h.Check(), "tick lost")
	h.Ticked(Tick{Job: "report", Tick: tick, Event: "missed"})
	violation(t, h.Check(), "tick missed without a reason")
	h.ticks[1].Reason = "past its starting deadline"
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}

	h = New()
	h.Ran(Run{Job: "sync", Tick: tick, Worker: "w1", Start: h.at(0), End: h.at(100), Exclusive: true})
	h.Ran(Run{Job: "sync", Tick: tick.Add(time.Minute), Worker: "w2", Start: h.at(50), End: h.at(150), Exclusive: true})
	violation(t, h.Check(), "runs overlapped")
	h.runs[1].Exclusive, h.runs[0].Exclusive = false, false
	if err := h.Check(); err != nil {
		t.Fatalf("overlapping runs of an allow job: %v", err)
	}
}

// Against real Redis: baton's locks under a load give a clean history; two
// replicas that disagree on the key prefix (a misconfiguration: they lock
// different keys for one resource) are caught.
func TestLockLoadOnRealRedis(t *testing.T) {
	srv := redistest.New(t)
	newClient := func(prefix string) *locking.Client {
		rdb := srv.TestClient(t)
		c, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithPrefix(prefix), locking.WithMasterTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	run := func(clients ...*locking.Client) *History {
		h := New()
		ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
		defer cancel()
		n := LockLoad{Clients: clients, Keys: []string{"a", "b"}, Goroutines: 6, TTL: 500 * time.Millisecond,
			Hold: 5 * time.Millisecond, Wait: time.Second, Seed: 1}.Run(ctx, h)
		if n < 10 {
			t.Fatalf("only %d leases taken", n)
		}
		return h
	}
	if err := run(newClient("x:"), newClient("x:")).Check(); err != nil {
		t.Fatalf("baton's locks: %v", err)
	}
	err := run(newClient("x:"), newClient("y:")).Check()
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("two prefixes for one resource: Check = %v, want a violation", err)
	}
	t.Logf("caught:\n%v", v)
}

// Where the scheduler reports its claims, a dispatch or a commit by a
// replica that did not hold the tick's claim (never won, or released) is a
// violation.
func TestDispatchNeedsAClaim(t *testing.T) {
	tick := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	h := New()
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "claimed", Replica: "r1", At: h.at(0)})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "dispatched", Replica: "r1", At: h.at(5)})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "committed", Replica: "r1", At: h.at(6)})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "claimed", Replica: "r1", At: h.at(10)})
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "released", Replica: "r1", At: h.at(11)})
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "dispatched", Replica: "r1", At: h.at(12)})
	violation(t, h.Check(), "dispatched without a claim")

	h = New()
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "claimed", Replica: "r1", At: h.at(0)})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "committed", Replica: "r2", At: h.at(1)})
	violation(t, h.Check(), "committed without a claim")
}
