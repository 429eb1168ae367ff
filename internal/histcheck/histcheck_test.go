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

// Histories on the edges of the rules: each test states the right verdict.

// A lease recorded without a validity deadline and not (yet) ended is held
// as far as its holder knows. Believed() then returns a zero "to", and
// checkOverlap's !bFrom.Before(aTo) skips every later lease: an exclusive
// lease taken while it is held escapes the overlap rule. (A zero End with a
// zero Deadline arises for any recorder that has no deadline to give: a
// holder process that prints none, a lease without a ttl.)
func TestOverlapWithOpenLeaseWithoutDeadline(t *testing.T) {
	h := New()
	h.Acquired("a", "k", false, 1, h.at(0), h.at(0), time.Time{}) // held, no deadline known
	h.Acquired("b", "k", false, 2, h.at(50), h.at(50), h.at(150)).Ended(h.at(100), time.Time{}, "released")
	err := h.Check()
	var v *Violation
	if !errors.As(err, &v) || v.Rule != "overlap" {
		t.Errorf("a holds k from 0 on with no end; b holds it 50-100: Check = %v, want an overlap", err)
	}
}

// A lease whose recorded Acquired comes after its own validity deadline
// (the holder's goroutine stalled between Lock returning and recording, or
// the reply came late) never was believed held: its interval is empty. The
// checker still orders it by that late Acquired and reports a correct
// history as a violation. Here b was granted first (asked at 0, fence 10,
// deadline 396) and recorded only at 500; a was granted after b's key
// expired (asked 410, fence 11) and released at 450.
func TestEmptyIntervalIsNotAViolation(t *testing.T) {
	h := New()
	h.Acquired("b", "k", false, 10, h.at(0), h.at(500), h.at(396)).Ended(h.at(501), time.Time{}, "lost: validity deadline passed")
	h.Acquired("a", "k", false, 11, h.at(410), h.at(421), h.at(816)).Ended(h.at(450), time.Time{}, "released")
	if err := h.Check(); err != nil {
		t.Errorf("b believed nothing (deadline 396 < recorded acquire 500), a came after: Check = %v, want nil", err)
	}
	// the same with a still holding when b records: "overlap"
	h = New()
	h.Acquired("b", "k", false, 10, h.at(0), h.at(500), h.at(396)).Ended(h.at(501), time.Time{}, "lost: validity deadline passed")
	h.Acquired("a", "k", false, 11, h.at(410), h.at(421), h.at(816)).Ended(h.at(700), time.Time{}, "released")
	if err := h.Check(); err != nil {
		t.Errorf("same, a held to 700: Check = %v, want nil", err)
	}
}

// G3: a holder must notice a lost lock by its validity deadline and never
// act on it after. A write offered after the writer's deadline is such an
// act; the store refused it only because the next holder happened to write
// first. checkWrites looks at accepted writes only, so it passes.
func TestRefusedWriteAfterDeadlineIsAViolation(t *testing.T) {
	h := New()
	s := h.Store()
	h.Acquired("frozen", "k", false, 1, h.at(0), h.at(0), h.at(100)).Ended(h.at(400), time.Time{}, "noticed on resume")
	h.Acquired("next", "k", false, 2, h.at(150), h.at(150), h.at(300)).Ended(h.at(250), time.Time{}, "released")
	s.Write("next", "k", 2, h.at(160))
	if s.Write("frozen", "k", 1, h.at(350)) { // decided at 350, 250 ms past its deadline
		t.Fatal("store took a stale fence")
	}
	if err := h.Check(); err == nil {
		t.Errorf("frozen offered a write at 350, its deadline was 100: Check = nil, want a violation (acted on a lease past its deadline)")
	}
}

// A run whose end was not recorded (still running, or its end line lost)
// has a zero End; b.Start.Before(a.End) is then false and an exclusive run
// started while it went on escapes the rule.
func TestRunWithoutEndStillExcludes(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ran(Run{Job: "sync", Tick: tick, Worker: "w1", Start: h.at(0), Exclusive: true}) // no end seen
	h.Ran(Run{Job: "sync", Tick: tick.Add(time.Second), Worker: "w2", Start: h.at(50), End: h.at(150), Exclusive: true})
	var v *Violation
	if err := h.Check(); !errors.As(err, &v) || v.Rule != "runs overlapped" {
		t.Errorf("w1 started at 0 and never ended, w2 ran 50-150: Check = %v, want runs overlapped", err)
	}
}

// G1 for runs: one tick of a job run twice, one run after the other, is not
// a tick run once. checkRuns only looks for overlap and checkTicks never
// sees runs, so TestChaos's slow-forbid job (fed to Ran only) could run a
// tick twice unnoticed.
func TestSameTickRunTwiceIsAViolation(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ran(Run{Job: "slow-forbid", Tick: tick, Worker: "fence 7", Start: h.at(0), End: h.at(100), Exclusive: true})
	h.Ran(Run{Job: "slow-forbid", Tick: tick, Worker: "fence 9", Start: h.at(200), End: h.at(300), Exclusive: true})
	if err := h.Check(); err == nil {
		t.Errorf("tick %v of slow-forbid ran twice (fences 7 and 9): Check = nil, want a violation", tick)
	}
}

// Only the first miss's reason is looked at: a reasonless miss recorded by
// a second replica passes.
func TestEveryMissNeedsAReason(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "expected"})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "missed", Replica: "r1", Reason: "past its starting deadline"})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "missed", Replica: "r2"})
	if err := h.Check(); err == nil {
		t.Errorf("r2 recorded the tick missed without a reason: Check = nil, want tick missed without a reason")
	}
}

// Counts.Missed counts miss events, not ticks: one tick recorded missed by
// two replicas (or by a replica and again by catch-up) counts twice, so
// expected = dispatched + missed + lost no longer holds, and a tick both
// dispatched and missed shows up in both columns with nothing flagging it.
// TestChaos and TestQueueRedisRestart print these numbers as the result.
func TestCountsMissedPerTick(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "expected"})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "missed", Replica: "r1", Reason: "late"})
	h.Ticked(Tick{Job: "j", Tick: tick, Event: "missed", Replica: "r2", Reason: "late"})
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "expected"})
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "dispatched", Replica: "r1"})
	h.Ticked(Tick{Job: "j", Tick: tick.Add(time.Second), Event: "missed", Replica: "r2", Reason: "late"})
	c := h.Counts()
	if c.Expected != c.Dispatched+c.Missed+c.Lost {
		t.Errorf("2 ticks expected, counts %+v: dispatched+missed+lost = %d (missed counts events; a tick both dispatched and missed is counted in both)", c, c.Dispatched+c.Missed+c.Lost)
	}
}

// A dispatch of a tick that is not in the expected set at all (not an
// instant of the schedule, e.g. a replica firing off-grid or early under a
// stepped clock) passes: checkTicks judges only ticks that are expected or
// dispatched twice, and records no dispatch time, so an early dispatch
// (G1 "across clock skew") cannot be seen.
func TestUnexpectedDispatchInsideTheWindow(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	for i := range 3 {
		h.Ticked(Tick{Job: "a", Tick: tick.Add(time.Duration(i) * time.Second), Event: "expected"})
		h.Ticked(Tick{Job: "a", Tick: tick.Add(time.Duration(i) * time.Second), Event: "dispatched", Replica: "r0"})
	}
	h.Ticked(Tick{Job: "a", Tick: tick.Add(1500 * time.Millisecond), Event: "dispatched", Replica: "r1"}) // off the schedule, inside the window
	if err := h.Check(); err == nil {
		t.Errorf("a tick at +1.5s of an @every 1s job was dispatched inside the checked window: Check = nil, want a violation")
	}
}

// After the fixes (7b2b3ae): checkRuns's "tick ran twice" fires when either
// of two runs of a tick has an end. A run cut off by a crash (no end) and
// asynq's retry that completes is the documented at-least-once case the
// rule's comment means to allow; it is reported as a tick run twice.
func TestCrashThenRetryIsNotATickTwice(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ran(Run{Job: "every-second", Tick: tick, Worker: "w1", Start: h.at(0)})                   // cut off by a crash
	h.Ran(Run{Job: "every-second", Tick: tick, Worker: "w2", Start: h.at(500), End: h.at(600)}) // asynq's retry
	if err := h.Check(); err != nil {
		t.Errorf("a crashed run and its retry: Check = %v, want nil", err)
	}
}

// A run stopped when its lease was lost (it wrote an end, but did not
// complete) and its retry are not a tick run twice; a completed run and
// another run of its tick are. (Seen in a chaos run: a forbid run killed
// at its lease deadline during a lock master outage, retried after.)
func TestStoppedRunThenRetryIsNotATickTwice(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ran(Run{Job: "slow", Tick: tick, Worker: "fence 1", Start: h.at(0), End: h.at(900), Stopped: true, Exclusive: true})
	h.Ran(Run{Job: "slow", Tick: tick, Worker: "fence 2", Start: h.at(11000), End: h.at(12500), Exclusive: true})
	if err := h.Check(); err != nil {
		t.Errorf("a stopped run and its retry: Check = %v, want nil", err)
	}
	h = New()
	h.Ran(Run{Job: "slow", Tick: tick, Worker: "fence 1", Start: h.at(0), End: h.at(900), Exclusive: true})
	h.Ran(Run{Job: "slow", Tick: tick, Worker: "fence 2", Start: h.at(11000), End: h.at(12500), Exclusive: true})
	if err := h.Check(); err == nil || !strings.Contains(err.Error(), "tick ran twice") {
		t.Errorf("a completed run and another: Check = %v, want a tick run twice", err)
	}
}

// Claims are checked only as "held by the dispatcher when it dispatched":
// two replicas winning one tick's claim at once (the mutual exclusion the
// claim exists for) passes as long as only one of them dispatched. The
// claimed event carries no lease deadline, so the checker cannot tell this
// from a claim taken over after the first one's lease expired.
func TestTwoClaimsAtOnceAreAViolation(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New()
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "expected"})
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "claimed", Replica: "r1", At: h.at(0)})   // tick lease 1 s
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "claimed", Replica: "r2", At: h.at(200)}) // r1's lease still runs
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "dispatched", Replica: "r2", At: h.at(300)})
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "committed", Replica: "r2", At: h.at(310)})
	h.Ticked(Tick{Job: "a", Tick: tick, Event: "committed", Replica: "r1", At: h.at(400)}) // r1 commits too
	if err := h.Check(); err == nil {
		t.Errorf("r1 and r2 both won the claim of %v within r1's 1 s tick lease: Check = nil, want a violation", tick)
	}
}

// Two readers whose acquires ran at once may come back in the other order:
// the first granted (the lower fence) returns after the second released.
// Readers' fences are not ordered among themselves; a writer after them is
// above both, and a reader after a writer above the writer.
func TestReadersMayReturnOutOfGrantOrder(t *testing.T) {
	h := New()
	h.Acquired("slow", "doc", true, 5, h.at(0), h.at(150), h.at(500)).Ended(h.at(160), time.Time{}, "released")
	h.Acquired("fast", "doc", true, 6, h.at(1), h.at(20), h.at(500)).Ended(h.at(100), time.Time{}, "released")
	if err := h.Check(); err != nil {
		t.Errorf("a reader granted first returning last: %v", err)
	}
	h.Acquired("w", "doc", false, 6, h.at(170), h.at(180), h.at(600)).Ended(h.at(200), time.Time{}, "released")
	violation(t, h.Check(), "fence order")
	h.leases[2].Fence = 7
	h.Acquired("r", "doc", true, 7, h.at(210), h.at(220), h.at(600)).Ended(h.at(230), time.Time{}, "released")
	violation(t, h.Check(), "fence order")
}

// At most a semaphore's limit of its slots are believed held at once.
func TestSemaphoreOverTheLimit(t *testing.T) {
	h := New()
	h.AcquiredSlot("a", "warehouse", 2, "sem:warehouse#0", 1, h.at(0), h.at(1), h.at(300)).Ended(h.at(100), time.Time{}, "released")
	h.AcquiredSlot("b", "warehouse", 2, "sem:warehouse#1", 1, h.at(0), h.at(2), h.at(300)).Ended(h.at(100), time.Time{}, "released")
	h.AcquiredSlot("c", "warehouse", 2, "sem:warehouse#2", 1, h.at(50), h.at(100), h.at(300)).Ended(h.at(150), time.Time{}, "released")
	if err := h.Check(); err != nil {
		t.Errorf("c in as a and b leave: %v", err)
	}
	h.leases[2].Acquired = h.at(99)
	v := violation(t, h.Check(), "over the limit")
	if !strings.Contains(v.Error(), "c joined a") {
		t.Errorf("report: %v", v)
	}
}

// The chain rule: a child's run of a tick starts after a run of that tick
// of each parent succeeded and ended; one that starts before, or after a
// parent's run that failed, or with no parent run at all, is a violation.
func TestAChildRunBeforeItsParentsSuccessIsAViolation(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		runs   func(h *History) []Run
		broken bool
	}{
		{"after its parent's success", func(h *History) []Run {
			return []Run{{Job: "extract", Tick: tick, Worker: "w1", Start: h.at(0), End: h.at(100), Succeeded: true},
				{Job: "load", Tick: tick, Worker: "w2", Start: h.at(150), End: h.at(200), After: []string{"extract"}}}
		}, false},
		{"before its parent ended", func(h *History) []Run {
			return []Run{{Job: "extract", Tick: tick, Worker: "w1", Start: h.at(0), End: h.at(100), Succeeded: true},
				{Job: "load", Tick: tick, Worker: "w2", Start: h.at(50), End: h.at(200), After: []string{"extract"}}}
		}, true},
		{"after its parent failed", func(h *History) []Run {
			return []Run{{Job: "extract", Tick: tick, Worker: "w1", Start: h.at(0), End: h.at(100)},
				{Job: "load", Tick: tick, Worker: "w2", Start: h.at(150), End: h.at(200), After: []string{"extract"}}}
		}, true},
		{"with no parent run", func(h *History) []Run {
			return []Run{{Job: "load", Tick: tick, Worker: "w2", Start: h.at(150), End: h.at(200), After: []string{"extract"}}}
		}, true},
		{"after another tick's parent run", func(h *History) []Run {
			return []Run{{Job: "extract", Tick: tick.Add(time.Second), Worker: "w1", Start: h.at(0), End: h.at(100), Succeeded: true},
				{Job: "load", Tick: tick, Worker: "w2", Start: h.at(150), End: h.at(200), After: []string{"extract"}}}
		}, true},
	} {
		h := New()
		for _, r := range c.runs(h) {
			h.Ran(r)
		}
		err := h.Check()
		if got := err != nil && strings.Contains(err.Error(), "chain order"); got != c.broken {
			t.Errorf("%s: Check = %v, want a chain violation: %v", c.name, err, c.broken)
		}
	}
}
