package locking_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// The lock histories of the fault schedules are checked twice: by
// histcheck, baton's own checker, and by porcupine, a linearizability
// checker baton did not write, against the sequential models below. A bug
// in one checker then cannot hide a bug in the lock.
//
// What is checked is what a holder believed, as histcheck records it: a
// lease is held from the moment its acquire took effect (some instant
// between the call and its return) until its holder stopped believing it
// held it, the earlier of the end it noticed (released, or the lost-lock
// signal: Done, Err) and its last validity deadline. The key itself lives
// longer in Redis (until the release script ran, or its expiry by the
// masters' clock); G3 says the lease ends before the key does, so the
// believed holdings must fit a sequential lock: that is the claim tested.
// So an expired lease is a holder no longer: its end is placed at its
// deadline, as its holder's belief ended there.
//
// Lost and late replies. A Lock call that failed (an error, a timeout, a
// reply lost on the way) may have taken the key on some masters, and may
// have used up a fence, but its caller has no lease and acts on nothing:
// whatever it did in Redis only kept others out for a while, which no rule
// here forbids, and a fence used up by nobody leaves a gap, which the
// fence rules allow. So it is no operation of the model. Left open (its
// return at infinity), porcupine would have to place it somewhere: as a
// take, it would hold the lock to the end of the history and refuse every
// later holder, though its caller gave up; as a take that may not have
// happened, it would allow nothing and forbid nothing. What is unknown
// about it lies in Redis, and the model holds beliefs only (a holder's
// belief never outlives its key: G3). A call whose reply came after the
// lease's own validity deadline returned a lease that was never believed
// held: it is one operation ("lapsed") that took the key and its fence at
// some instant of the call, and let go at once. A lease still held when
// the history ends has no end operation; one whose holder never reported
// an end ends at its deadline.

// opKind is what a history operation did.
type opKind int

const (
	take   opKind = iota // Lock returned the lease: held from some instant of the call
	end                  // the holder stopped believing it held the lease
	check                // the holder wrote with the lease's fence, believing it held it
	lapsed               // Lock returned a lease already past its deadline: never held
)

func (k opKind) String() string { return [...]string{"take", "end", "check", "lapsed"}[k] }

// lockOp is the input of one operation: the lease it belongs to (its index
// in the history, which stands for its holder), and what the lease says.
type lockOp struct {
	kind   opKind
	lease  int    // -1 for a write that no lease carried
	client string // for reports
	res    string // the lock the operation is on: a semaphore's name, else the key
	slot   string // the key the lease holds, whose fences the model orders
	shared bool
	limit  int // of a semaphore
	fence  int64
}

func (o lockOp) String() string {
	s := fmt.Sprintf("%s %s lease %d (%s, fence %d)", o.kind, o.slot, o.lease, o.client, o.fence)
	if o.shared {
		s += " shared"
	}
	return s
}

// holding is one lease a lock holds in the model.
type holding struct {
	lease  int
	shared bool
	slot   string
}

// slotFence is what a slot (a key) granted: the largest fence of any lease
// and of an exclusive one.
type slotFence struct {
	slot            string
	last, exclusive int64
}

// lockState is the model's state of one lock: who holds it, and the
// fences its keys granted. Steps return new slices: states are values.
type lockState struct {
	held   []holding   // by lease
	fences []slotFence // by slot
}

// admits decides whether a take (or a lapsed take) of op can happen while
// held hold the lock: it is what tells a mutex from a read/write lock and a
// semaphore.
type admits func(held []holding, op lockOp) bool

// The three locks' admission rules. A mutex: nobody holds it. A read/write
// lock: a reader when no writer holds it, a writer when nobody does. A
// semaphore: fewer holders than its limit, and nobody on its slot (each
// slot is a lock of its own, with its own fences).
var (
	mutexModel = lockModel(func(held []holding, _ lockOp) bool { return len(held) == 0 })
	rwModel    = lockModel(func(held []holding, op lockOp) bool {
		if !op.shared {
			return len(held) == 0
		}
		return !slices.ContainsFunc(held, func(h holding) bool { return !h.shared })
	})
	semaphoreModel = lockModel(func(held []holding, op lockOp) bool {
		return len(held) < op.limit && !slices.ContainsFunc(held, func(h holding) bool { return h.slot == op.slot })
	})
)

// lockModel is the sequential lock whose takes admit decides, with fences
// (G4): an exclusive lease's fence is above every fence its key granted
// before, a shared one's (a reader's) above every exclusive one's before.
// So a mutex's fences, and a semaphore slot's, strictly increase; readers
// draw from the writers' counter, but two readers granted at once may
// come back in either order, and on a quorum even with one fence (each
// the largest its majority answered), which the read/write lock allows:
// no writer comes between them. A lapsed take draws its fence like any.
// An end and a check need the lease to hold the lock. Histories are split
// by lock: locks are independent.
func lockModel(admit admits) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, o := range ops {
				res := o.Input.(lockOp).res
				if by[res] == nil {
					order = append(order, res)
				}
				by[res] = append(by[res], o)
			}
			var out [][]porcupine.Operation
			for _, res := range order {
				out = append(out, by[res])
			}
			return out
		},
		Init: func() any { return lockState{} },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(lockState), input.(lockOp)
			holds := slices.IndexFunc(s.held, func(h holding) bool { return h.lease == op.lease })
			switch op.kind {
			case take, lapsed:
				i := slices.IndexFunc(s.fences, func(f slotFence) bool { return f.slot == op.slot })
				f := slotFence{slot: op.slot}
				if i >= 0 {
					f = s.fences[i]
				}
				above := f.last
				if op.shared {
					above = f.exclusive
				}
				if holds >= 0 || !admit(s.held, op) || op.fence <= above {
					return false, s
				}
				f.last = max(f.last, op.fence)
				if !op.shared {
					f.exclusive = op.fence
				}
				next := lockState{held: s.held, fences: slices.Clone(s.fences)}
				if i >= 0 {
					next.fences[i] = f
				} else {
					next.fences = append(next.fences, f)
					slices.SortFunc(next.fences, func(a, b slotFence) int { return cmp.Compare(a.slot, b.slot) })
				}
				if op.kind == take {
					next.held = append(slices.Clone(s.held), holding{op.lease, op.shared, op.slot})
					slices.SortFunc(next.held, func(a, b holding) int { return cmp.Compare(a.lease, b.lease) })
				}
				return true, next
			case end:
				if holds < 0 {
					return false, s
				}
				return true, lockState{held: slices.Delete(slices.Clone(s.held), holds, holds+1), fences: s.fences}
			default: // check
				return holds >= 0, s
			}
		},
		Equal: func(a, b any) bool {
			x, y := a.(lockState), b.(lockState)
			return slices.Equal(x.held, y.held) && slices.Equal(x.fences, y.fences)
		},
		DescribeOperation: func(input, _ any) string { return input.(lockOp).String() },
		DescribeState: func(state any) string {
			s := state.(lockState)
			return fmt.Sprintf("held %v, fences %v", s.held, s.fences)
		},
	}
}

// lockOps turns a history's leases and writes into operations, times in
// nanoseconds from the first call. Times compare as histcheck compares
// them (monotonic within a process, wall across processes).
func lockOps(h *histcheck.History) []porcupine.Operation {
	leases, writes := h.Leases(), h.Writes()
	if len(leases) == 0 {
		return nil
	}
	origin := leases[0].Asked
	for _, l := range leases {
		if l.Asked.Before(origin) {
			origin = l.Asked
		}
	}
	ns := func(t time.Time) int64 { return int64(t.Sub(origin)) }
	var ops []porcupine.Operation
	add := func(client int, op lockOp, call, ret time.Time) {
		ops = append(ops, porcupine.Operation{ClientId: client, Input: op, Call: ns(call), Return: ns(ret)})
	}
	opOf := func(i int, kind opKind) lockOp {
		l := leases[i]
		res := l.Key
		if l.Sem != "" {
			res = l.Sem
		}
		return lockOp{kind: kind, lease: i, client: l.Client, res: res, slot: l.Key, shared: l.Shared, limit: l.Limit, fence: l.Fence}
	}
	for i, l := range leases {
		from, to := l.Believed()
		if !to.After(from) {
			add(i, opOf(i, lapsed), l.Asked, l.Acquired)
			continue
		}
		add(i, opOf(i, take), l.Asked, l.Acquired)
		if !l.End.IsZero() || !l.Deadline.IsZero() { // else held to the end of the history
			add(i, opOf(i, end), to, to)
		}
	}
	for _, w := range writes {
		i := slices.IndexFunc(leases, func(l histcheck.Lease) bool {
			return l.Client == w.Client && l.Key == w.Key && l.Fence == w.Fence
		})
		op := lockOp{kind: check, lease: -1, client: w.Client, res: w.Key, slot: w.Key, fence: w.Fence}
		client := len(leases)
		if i >= 0 {
			op, client = opOf(i, check), i
		}
		add(client, op, w.At, w.At)
	}
	return ops
}

// porcupineCheck is porcupine's verdict on h under model: nil when the
// history is linearizable, else an error that shows, for each lock whose
// history is not, the end of its longest linearizable prefix and the
// operations that could not follow it. A history porcupine cannot decide
// within timeout is an error too: the histories are kept small enough.
func porcupineCheck(model porcupine.Model, h *histcheck.History, timeout time.Duration) error {
	ops := lockOps(h)
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("porcupine: %d operations undecided after %v", len(ops), timeout)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "porcupine: not linearizable (%d operations)", len(ops))
	partials := info.PartialLinearizationsOperations() // in the order of model.Partition
	for i, part := range model.Partition(ops) {
		var longest []porcupine.Operation
		for _, l := range partials[i] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		done := map[porcupine.Operation]bool{}
		for _, o := range longest {
			done[o] = true
		}
		var rest []porcupine.Operation
		for _, o := range part {
			if !done[o] {
				rest = append(rest, o)
			}
		}
		slices.SortStableFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		line := func(o porcupine.Operation) {
			fmt.Fprintf(&b, "\n    [%v, %v] %v", time.Duration(o.Call), time.Duration(o.Return), o.Input)
		}
		fmt.Fprintf(&b, "\n  %q: %d of %d operations linearize; the last of them:", part[0].Input.(lockOp).res, len(longest), len(part))
		for _, o := range longest[max(0, len(longest)-6):] {
			line(o)
		}
		b.WriteString("\n  and none of these can follow:")
		for _, o := range rest[:min(len(rest), 6)] {
			line(o)
		}
	}
	return errors.New(b.String())
}

// linearizable fails t unless porcupine finds h linearizable under model.
func linearizable(t *testing.T, model porcupine.Model, h *histcheck.History) {
	t.Helper()
	start := time.Now()
	if err := porcupineCheck(model, h, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("porcupine: %d leases and %d writes linearizable, checked in %v", len(h.Leases()), len(h.Writes()), time.Since(start).Round(time.Millisecond))
}

// Made-up histories: each bad one is refused by porcupine, and by
// histcheck too, and its nearest good one is accepted by both, so neither
// checker passes everything.

// ms is a made-up history's clock: n ms after the tests began.
func ms(n int) time.Time { return msStart.Add(time.Duration(n) * time.Millisecond) }

var msStart = time.Now()

// released records in a made-up history a lease of key that client asked
// for at asked ms, got at got with fence, and released at end, well before
// its deadline.
func released(h *histcheck.History, client, key string, shared bool, fence int64, asked, got, end int) {
	h.Acquired(client, key, shared, fence, ms(asked), ms(got), ms(end+300)).Ended(ms(end), time.Time{}, "released")
}

// verdicts checks h with both checkers under model: bad says whether it
// must be refused.
func verdicts(t *testing.T, model porcupine.Model, h *histcheck.History, bad bool) {
	t.Helper()
	perr := porcupineCheck(model, h, 10*time.Second)
	herr := h.Check()
	if bad {
		if perr == nil {
			t.Errorf("porcupine accepted a bad history")
		}
		if herr == nil {
			t.Errorf("histcheck accepted a bad history")
		}
		t.Logf("refused:\n%v\n%v", perr, herr)
		return
	}
	if perr != nil {
		t.Errorf("porcupine refused a good history: %v", perr)
	}
	if herr != nil {
		t.Errorf("histcheck refused a good history: %v", herr)
	}
}

func TestPorcupineRejectsTwoOverlappingHolders(t *testing.T) {
	for _, c := range []struct {
		name  string
		bFrom int // b's acquire returns then
		bad   bool
	}{{"b after a", 110, false}, {"b while a holds", 60, true}} {
		t.Run(c.name, func(t *testing.T) {
			h := histcheck.New()
			released(h, "a", "ledger", false, 7, 0, 1, 100)
			released(h, "b", "ledger", false, 8, 40, c.bFrom, 200)
			verdicts(t, mutexModel, h, c.bad)
		})
	}
	// a lease whose holder noticed nothing, frozen past its deadline: its
	// holding ends at the deadline, and b may take the key after it, not
	// before
	for _, c := range []struct {
		name  string
		bFrom int
		bad   bool
	}{{"b after a's deadline", 160, false}, {"b before a's deadline", 90, true}} {
		t.Run(c.name, func(t *testing.T) {
			h := histcheck.New()
			h.Acquired("frozen", "ledger", false, 7, ms(0), ms(1), ms(100)).Ended(ms(900), time.Time{}, "noticed on resume")
			released(h, "b", "ledger", false, 8, 20, c.bFrom, 200)
			verdicts(t, mutexModel, h, c.bad)
		})
	}
}

// Two acquires whose calls overlap may take effect in either order: the
// one that returned last may have taken the key first, its holder then
// giving it up before the other's call returned.
func TestPorcupineOrdersOverlappingCalls(t *testing.T) {
	h := histcheck.New()
	released(h, "slow", "ledger", false, 6, 0, 100, 150)
	released(h, "fast", "ledger", false, 5, 10, 20, 50)
	verdicts(t, mutexModel, h, false)
	released(h, "late", "ledger", false, 9, 60, 70, 80)
	// late (fence 9) fits only between fast and slow, whose 6 would follow 9
	verdicts(t, mutexModel, h, true)
}

func TestPorcupineRejectsAFenceGoingBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		fence int64
		bad   bool
	}{{"up", 10, false}, {"same", 9, true}, {"back", 5, true}} {
		t.Run(c.name, func(t *testing.T) {
			h := histcheck.New()
			released(h, "a", "ledger", false, 9, 0, 1, 40)
			released(h, "b", "ledger", false, c.fence, 60, 61, 100)
			verdicts(t, mutexModel, h, c.bad)
		})
	}
	// a lease that came back past its deadline was never held, but its
	// fence was issued: one after it must be higher
	h := histcheck.New()
	h.Acquired("late reply", "ledger", false, 10, ms(0), ms(500), ms(396))
	released(h, "a", "ledger", false, 11, 410, 421, 450)
	verdicts(t, mutexModel, h, false)
	h = histcheck.New()
	h.Acquired("late reply", "ledger", false, 10, ms(0), ms(500), ms(396))
	released(h, "a", "ledger", false, 9, 510, 521, 550)
	if err := porcupineCheck(mutexModel, h, 10*time.Second); err == nil {
		t.Errorf("porcupine accepted fence 9 after fence 10 (issued, never held)")
	}
}

// A holder writes only while it believes it holds the lock: a write with
// its fence after its deadline, or with a fence no lease carried, is
// refused.
func TestPorcupineRejectsAWriteOutsideTheLease(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int
		bad  bool
	}{{"inside", 50, false}, {"after its deadline", 150, true}, {"before its acquire was called", -5, true}} {
		t.Run(c.name, func(t *testing.T) {
			h := histcheck.New()
			s := h.Store()
			h.Acquired("a", "ledger", false, 3, ms(0), ms(10), ms(100)).Ended(ms(200), time.Time{}, "noticed")
			s.Write("a", "ledger", 3, ms(c.at))
			verdicts(t, mutexModel, h, c.bad)
		})
	}
	h := histcheck.New()
	released(h, "a", "ledger", false, 3, 0, 10, 90)
	h.Store().Write("a", "ledger", 4, ms(50))
	verdicts(t, mutexModel, h, true)
}

// A read/write lock: readers beside readers, a writer alone. Readers'
// fences are not ordered among themselves (two readers granted at once may
// come back in either order, or on a quorum with one fence); a writer's is
// above every fence before it, a reader's above every writer's before it.
// The mutex model, which knows no readers, refuses the good ones.
func TestPorcupineRejectsAWriterBesideAReader(t *testing.T) {
	type lease struct {
		client             string
		shared             bool
		fence              int64
		asked, got, ending int
	}
	readers := []lease{{"r1", true, 1, 0, 1, 100}, {"r2", true, 2, 10, 11, 120}}
	outOfOrder := []lease{{"granted first", true, 5, 0, 150, 160}, {"returned first", true, 6, 1, 20, 100}, {"same fence", true, 6, 2, 30, 40}}
	for _, c := range []struct {
		name   string
		leases []lease
		bad    bool
	}{
		{"a writer after the readers", append(readers, lease{"w", false, 3, 5, 130, 200}), false},
		{"readers out of grant order, two with one fence", outOfOrder, false},
		{"a writer among readers", append(readers, lease{"w", false, 5, 20, 60, 70}), true},
		{"a writer not above a reader before it", append(outOfOrder, lease{"w", false, 6, 170, 180, 200}), true},
		{"a reader not above the writer before it", []lease{{"w", false, 8, 0, 1, 50}, {"r", true, 7, 60, 61, 90}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := histcheck.New()
			for _, l := range c.leases {
				released(h, l.client, "doc", l.shared, l.fence, l.asked, l.got, l.ending)
			}
			verdicts(t, rwModel, h, c.bad)
			if err := porcupineCheck(mutexModel, h, 10*time.Second); !c.bad && err == nil {
				t.Errorf("the mutex model took readers at once, or fences out of order")
			}
		})
	}
}

func TestPorcupineRejectsOneHolderTooMany(t *testing.T) {
	slot := func(h *histcheck.History, client, slot string, fence int64, from, to int) {
		h.AcquiredSlot(client, "warehouse", 2, slot, fence, ms(from), ms(from+1), ms(from+300)).Ended(ms(to), time.Time{}, "released")
	}
	h := histcheck.New()
	slot(h, "a", "sem:warehouse#0", 1, 0, 100)
	slot(h, "b", "sem:warehouse#1", 1, 10, 100)
	slot(h, "c", "sem:warehouse#0", 2, 110, 200)
	verdicts(t, semaphoreModel, h, false)
	// a third holder while two hold: on a slot of a limit since lowered
	slot(h, "d", "sem:warehouse#2", 1, 50, 60)
	verdicts(t, semaphoreModel, h, true)
	// two holders of one slot
	h = histcheck.New()
	slot(h, "a", "sem:warehouse#0", 1, 0, 100)
	slot(h, "b", "sem:warehouse#0", 2, 10, 100)
	verdicts(t, semaphoreModel, h, true)
	// a slot's fence going back
	h = histcheck.New()
	slot(h, "a", "sem:warehouse#0", 5, 0, 100)
	slot(h, "b", "sem:warehouse#0", 4, 110, 200)
	verdicts(t, semaphoreModel, h, true)
}

// On real Redis: the recording, the operations made of it and the model
// together catch two holders at once. Two clients that disagree on the key
// prefix (a misconfiguration: they lock different keys for one resource)
// both hold "ledger"; the same load with one prefix is linearizable.
func TestPorcupineCatchesTwoPrefixesForOneResource(t *testing.T) {
	srv := redistest.New(t)
	run := func(prefixes ...string) *histcheck.History {
		var clients []*locking.Client
		for _, p := range prefixes {
			clients = append(clients, newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithPrefix(p)))
		}
		h := histcheck.New()
		// bounded by count (40 leases), the time only a backstop
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if n := (histcheck.LockLoad{Clients: clients, Keys: []string{"ledger"}, Goroutines: 4, TTL: 500 * time.Millisecond,
			Hold: 5 * time.Millisecond, Wait: time.Second, Seed: 3, Leases: 40}).Run(ctx, h); n < 10 {
			t.Fatalf("only %d leases taken", n)
		}
		return h
	}
	linearizable(t, mutexModel, run("x:", "x:"))
	err := porcupineCheck(mutexModel, run("x:", "y:"), time.Minute)
	if err == nil {
		t.Fatal("two prefixes for one resource: porcupine found the history linearizable")
	}
	t.Logf("caught:\n%v", err)
}

// porcupine is a test-only dependency: no package of the module imports
// it outside its tests, while this package's tests do (so the check
// checks something).
func TestPorcupineIsATestOnlyDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const mod, dep = "github.com/batonhq/baton", "github.com/anishathalye/porcupine"
	out, err := exec.Command(gobin, "list", "-deps", mod+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if slices.Contains(strings.Fields(string(out)), dep) {
		t.Errorf("a package of %s imports %s outside its tests", mod, dep)
	}
	out, err = exec.Command(gobin, "list", "-deps", "-test", mod+"/locking").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps -test: %v\n%s", err, out)
	}
	if !slices.Contains(strings.Fields(string(out)), dep) {
		t.Errorf("the locking tests do not link %s: the check above checks nothing", dep)
	}
}
