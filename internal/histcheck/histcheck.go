// Package histcheck records what the parts of a baton deployment believed
// and did (leases their holders believed they held, writes a fencing store
// accepted or refused, ticks the scheduler dispatched, runs that ran) and
// checks the record against baton's guarantees:
//
//   - no two believed-held intervals of one lock overlap (a shared lease,
//     a reader's, may overlap other shared ones only);
//   - no more of a semaphore's slots are believed held at once than its
//     limit;
//   - fences increase with acquisition order: a lease's fence is above
//     those of the leases of its key believed held before it, but for two
//     shared leases (readers granted at once may come back in either
//     order, so their fences are not ordered among themselves; a writer's
//     is above every reader's before it, and every reader's after it
//     above the writer's);
//   - a store that rejects stale fences never accepted a write from a
//     superseded holder: accepted writes of a key come in fence order, each
//     from a holder that believed it held the key when it wrote;
//   - every (job, tick) of a window was dispatched exactly once, or was
//     recorded missed with a reason, and runs of a job that forbids overlap
//     never overlapped;
//   - a run of a job that runs after others (a chain) started only after
//     a run of the same tick of each of its parents succeeded and ended.
//
// Check reports the first violation with the two histories involved side by
// side. A History is safe for concurrent use; fault-schedule tests record
// into one while their faults run and check it at the end.
//
// Times are compared as recorded: in one process, time.Now (monotonic);
// across processes on one host, wall times (time.Unix(0, n)).
package histcheck

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// History is the record of one run.
type History struct {
	// MaxEarly, when set, is how long before its instant a tick may be
	// dispatched (the scheduler's skew bound): an earlier dispatch is a
	// violation.
	MaxEarly time.Duration

	mu     sync.Mutex
	start  time.Time
	leases []*Lease
	writes []Write
	ticks  []Tick
	runs   []Run
}

// New returns an empty history; times in reports are shown relative to its
// creation.
func New() *History { return &History{start: time.Now()} }

// Lease is one holding as its holder believed it: held from Acquired until
// the earlier of End (it released, or noticed the lease ended) and Deadline
// (its validity deadline, the last one an extension gave it: a holder that
// was frozen past it never acts on the lease again).
type Lease struct {
	Client string
	Key    string
	Shared bool // a reader's share: may overlap other shared leases
	// Of a semaphore's slot (Key is the slot's name): the semaphore's name
	// and limit. At most Limit leases of one Sem are held at once.
	Sem      string
	Limit    int
	Fence    int64
	Asked    time.Time // the acquire call began
	Acquired time.Time // it returned the lease
	Deadline time.Time // the validity deadline, as last extended
	End      time.Time // released, or noticed ended; zero while held
	Why      string    // how it ended

	h *History
}

// forever stands for "not ended" in intervals.
var forever = time.Unix(1<<62, 0)

// Believed returns the interval the holder believed it held the lease. A
// lease with neither an end nor a deadline is held to the end of the
// history; one recorded as acquired after its own deadline (the reply came
// too late) was never believed held: its interval is empty (to <= from).
func (l *Lease) Believed() (from, to time.Time) {
	to = l.Deadline
	if !l.End.IsZero() && (to.IsZero() || l.End.Before(to)) {
		to = l.End
	}
	if to.IsZero() {
		to = forever
	}
	return l.Acquired, to
}

// held tells a lease that was believed held for some time.
func (l *Lease) held() bool {
	from, to := l.Believed()
	return to.After(from)
}

// Acquired records a lease its holder just got.
func (h *History) Acquired(client, key string, shared bool, fence int64, asked, acquired, deadline time.Time) *Lease {
	l := &Lease{Client: client, Key: key, Shared: shared, Fence: fence, Asked: asked, Acquired: acquired, Deadline: deadline, h: h}
	h.mu.Lock()
	h.leases = append(h.leases, l)
	h.mu.Unlock()
	return l
}

// AcquiredSlot records a lease of one slot of semaphore sem of limit
// slots, just got.
func (h *History) AcquiredSlot(client, sem string, limit int, slot string, fence int64, asked, acquired, deadline time.Time) *Lease {
	l := h.Acquired(client, slot, false, fence, asked, acquired, deadline)
	h.mu.Lock()
	l.Sem, l.Limit = sem, limit
	h.mu.Unlock()
	return l
}

// Leases returns a copy of the leases recorded so far, in the order they
// were recorded: for checkers other than Check.
func (h *History) Leases() []Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Lease, len(h.leases))
	for i, l := range h.leases {
		out[i] = *l
	}
	return out
}

// Writes returns a copy of the writes offered to the history's stores so
// far, in the order they were recorded.
func (h *History) Writes() []Write {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// Ended records the end of a lease as its holder saw it: at, its last
// validity deadline, and why.
func (l *Lease) Ended(at, deadline time.Time, why string) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if l.End.IsZero() {
		l.End, l.Why = at, why
		if !deadline.IsZero() {
			l.Deadline = deadline
		}
	}
}

// Write is one write offered to a fencing store.
type Write struct {
	Client   string
	Key      string
	Fence    int64
	At       time.Time
	Accepted bool
}

// Store is an in-memory store that refuses stale writers: a write for a
// key is accepted only when its fence is at least the highest fence the
// store has accepted for that key. Every offer is recorded.
type Store struct {
	h    *History
	mu   sync.Mutex
	high map[string]int64
}

// Store returns a fencing store that records into h.
func (h *History) Store() *Store { return &Store{h: h, high: map[string]int64{}} }

// Write offers a write by client, holding key with fence, and reports
// whether the store accepted it. at is when the writer last saw its lease
// valid (it checked, then wrote): the moment its belief is judged at.
func (s *Store) Write(client, key string, fence int64, at time.Time) bool {
	s.mu.Lock()
	ok := fence >= s.high[key]
	if ok {
		s.high[key] = fence
	}
	s.mu.Unlock()
	s.h.mu.Lock()
	s.h.writes = append(s.h.writes, Write{Client: client, Key: key, Fence: fence, At: at, Accepted: ok})
	s.h.mu.Unlock()
	return ok
}

// Tick is what happened to one tick of a job: expected (it was due in the
// checked window), dispatched (by a replica), or missed (with a reason);
// and, where the scheduler reports them, claimed (a replica won its
// claim), committed (recorded done) and released (the claim given up).
type Tick struct {
	Job     string
	Tick    time.Time
	Event   string // "expected", "dispatched", "missed", "claimed", "committed", "released"
	Replica string
	Reason  string    // of a miss
	At      time.Time // when it happened; Ticked sets it when zero
	Until   time.Time // a claim's lease deadline, when known
}

// Ticked records a tick event.
func (h *History) Ticked(t Tick) {
	if t.At.IsZero() {
		t.At = time.Now()
	}
	h.mu.Lock()
	h.ticks = append(h.ticks, t)
	h.mu.Unlock()
}

// Run is one execution of a job's tick, from its start to its end as the
// worker saw them.
type Run struct {
	Job       string
	Tick      time.Time
	Worker    string
	Start     time.Time
	End       time.Time
	Exclusive bool // the job forbids overlapping runs
	// Stopped says the run ended without completing (stopped when its
	// lease was lost, or at shutdown): a retry of its tick is by design.
	Stopped bool
	// Succeeded says the run completed with success: its job's children
	// (After) may run its tick.
	Succeeded bool
	// After names the jobs this run's job runs after that have a tick at
	// Tick (a chain, on_parent_failure: skip): each must have a run of
	// Tick that succeeded and ended before this one started.
	After []string
}

// Ran records a run.
func (h *History) Ran(r Run) {
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
}

// Counts summarises a history. Of the expected ticks: Dispatched were
// dispatched (at least once), Missed were recorded not run and never
// dispatched, Lost neither (so Expected = Dispatched + Missed + Lost).
// Dispatches counts every dispatch event, Duplicated the dispatches of a
// tick beyond its first.
type Counts struct {
	Leases, Writes, Refused                                    int
	Expected, Dispatched, Missed, Lost, Dispatches, Duplicated int
	Runs                                                       int
}

// Counts returns how many of each event the history holds.
func (h *History) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	var c Counts
	c.Leases, c.Writes, c.Runs = len(h.leases), len(h.writes), len(h.runs)
	for _, w := range h.writes {
		if !w.Accepted {
			c.Refused++
		}
	}
	dispatched, missed := map[string]int{}, map[string]bool{}
	var expected []string
	for _, t := range h.ticks {
		id := t.Job + "@" + t.Tick.UTC().Format(time.RFC3339Nano)
		switch t.Event {
		case "expected":
			expected = append(expected, id)
		case "dispatched":
			c.Dispatches++
			dispatched[id]++
		case "missed":
			missed[id] = true
		}
	}
	for _, n := range dispatched {
		c.Duplicated += n - 1
	}
	c.Expected = len(expected)
	for _, id := range expected {
		switch {
		case dispatched[id] > 0:
			c.Dispatched++
		case missed[id]:
			c.Missed++
		default:
			c.Lost++
		}
	}
	return c
}

// Violation is a broken guarantee: the rule, what broke it, and the two
// histories involved (each a list of events of one party), shown side by
// side by Error.
type Violation struct {
	Rule        string
	What        string
	Left, Right Party
	origin      time.Time
}

// Party is one side of a violation: who, and its events in time order.
type Party struct {
	Name   string
	Events []Event
}

// Event is one line of a party's history.
type Event struct {
	At   time.Time
	What string
}

// Error renders the violation with both histories side by side.
func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "histcheck: %s: %s\n", v.Rule, v.What)
	type row struct {
		at          time.Time
		left, right string
	}
	var rows []row
	for _, e := range v.Left.Events {
		rows = append(rows, row{e.At, e.What, ""})
	}
	for _, e := range v.Right.Events {
		rows = append(rows, row{e.At, "", e.What})
	}
	slices.SortStableFunc(rows, func(a, b row) int { return a.at.Compare(b.at) })
	w := len(v.Left.Name)
	for _, r := range rows {
		w = max(w, len(r.left))
	}
	fmt.Fprintf(&b, "  %12s  %-*s | %s\n", "t", w, v.Left.Name, v.Right.Name)
	for _, r := range rows {
		fmt.Fprintf(&b, "  %12s  %-*s | %s\n", r.at.Sub(v.origin).Round(time.Microsecond), w, r.left, r.right)
	}
	return b.String()
}

// Check verifies the history against every rule and returns the first
// violation (an *Violation), or nil.
func (h *History) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, check := range []func() *Violation{h.checkOverlap, h.checkLimits, h.checkFences, h.checkWrites, h.checkTicks, h.checkRuns, h.checkChains} {
		if v := check(); v != nil {
			v.origin = h.start
			return v
		}
	}
	return nil
}

// leasesByKey returns the leases of each key, by acquisition time.
func (h *History) leasesByKey() map[string][]*Lease {
	by := map[string][]*Lease{}
	for _, l := range h.leases {
		by[l.Key] = append(by[l.Key], l)
	}
	for _, ls := range by {
		slices.SortStableFunc(ls, func(a, b *Lease) int { return a.Acquired.Compare(b.Acquired) })
	}
	return by
}

func (l *Lease) party(h *History) Party {
	from, _ := l.Believed()
	p := Party{Name: fmt.Sprintf("%s (fence %d)", l.Client, l.Fence)}
	p.Events = append(p.Events, Event{l.Asked, "asks for " + l.Key}, Event{from, fmt.Sprintf("holds %s, fence %d", l.Key, l.Fence)})
	if !l.Deadline.IsZero() {
		p.Events = append(p.Events, Event{l.Deadline, "validity deadline"})
	}
	if !l.End.IsZero() {
		p.Events = append(p.Events, Event{l.End, "ends: " + l.Why})
	}
	for _, w := range h.writes {
		if w.Client == l.Client && w.Key == l.Key && w.Fence == l.Fence {
			p.Events = append(p.Events, Event{w.At, fmt.Sprintf("writes with fence %d: accepted %v", w.Fence, w.Accepted)})
		}
	}
	return p
}

func (h *History) checkOverlap() *Violation {
	for key, ls := range h.leasesByKey() {
		for i, a := range ls {
			_, aTo := a.Believed()
			if !a.held() {
				continue
			}
			for _, b := range ls[i+1:] {
				bFrom, _ := b.Believed()
				if !b.held() || !bFrom.Before(aTo) {
					continue // b began after a ended (sorted: so did the rest, unless a longer one)
				}
				if a.Shared && b.Shared {
					continue
				}
				return &Violation{Rule: "overlap", What: fmt.Sprintf("%s and %s both believed they held %q from %v", a.Client, b.Client, key, bFrom.Sub(h.start).Round(time.Microsecond)),
					Left: a.party(h), Right: b.party(h)}
			}
		}
	}
	return nil
}

// checkLimits: at no instant more leases of a semaphore believed held than
// its limit. Believed intervals are closed at the start and open at the
// end, as checkOverlap takes them.
func (h *History) checkLimits() *Violation {
	bySem := map[string][]*Lease{}
	for _, l := range h.leases {
		if l.Sem != "" && l.held() {
			bySem[l.Sem] = append(bySem[l.Sem], l)
		}
	}
	for sem, ls := range bySem {
		for _, l := range ls {
			from, _ := l.Believed()
			var in []*Lease // held at from, l among them
			for _, o := range ls {
				if oFrom, oTo := o.Believed(); !oFrom.After(from) && oTo.After(from) {
					in = append(in, o)
				}
			}
			if len(in) > l.Limit {
				slices.SortStableFunc(in, func(a, b *Lease) int { return a.Acquired.Compare(b.Acquired) })
				last := in[len(in)-1]
				return &Violation{Rule: "over the limit", What: fmt.Sprintf("%d holders of semaphore %q (limit %d) at %v: %s joined %s and %d more",
					len(in), sem, l.Limit, from.Sub(h.start).Round(time.Microsecond), last.Client, in[0].Client, len(in)-2),
					Left: in[0].party(h), Right: last.party(h)}
			}
		}
	}
	return nil
}

func (h *History) checkFences() *Violation {
	for key, ls := range h.leasesByKey() {
		// a later holder's fence is above every earlier holder's: compare
		// each lease with those that ended (as believed) before it began
		for i, b := range ls {
			bFrom, _ := b.Believed()
			if !b.held() {
				continue
			}
			for _, a := range ls[:i] {
				_, aTo := a.Believed()
				if !a.held() || aTo.After(bFrom) || a.Shared && b.Shared {
					continue // they overlap, or two readers: no order between them
				}
				if b.Fence <= a.Fence {
					return &Violation{Rule: "fence order", What: fmt.Sprintf("%q: %s got fence %d after %s had %d", key, b.Client, b.Fence, a.Client, a.Fence),
						Left: a.party(h), Right: b.party(h)}
				}
			}
		}
	}
	return nil
}

func (h *History) checkWrites() *Violation {
	leases := h.leasesByKey()
	mine := func(w Write) *Lease {
		for _, l := range leases[w.Key] {
			if l.Client == w.Client && l.Fence == w.Fence {
				return l
			}
		}
		return nil
	}
	// a holder writes only while it believes it holds the key, whatever the
	// store then decides: a write offered after its deadline is acting on a
	// lost lock (G3), even when the store refuses it
	for _, w := range h.writes {
		l := mine(w)
		if l == nil {
			if !w.Accepted {
				continue
			}
			return &Violation{Rule: "write without a lease", What: fmt.Sprintf("%q: the store accepted a write by %s with fence %d that no lease of it carried", w.Key, w.Client, w.Fence),
				Left: Party{Name: w.Client, Events: []Event{{w.At, fmt.Sprintf("writes with fence %d: accepted", w.Fence)}}}}
		}
		from, to := l.Believed()
		if w.At.Before(from) || w.At.After(to) {
			return &Violation{Rule: "write outside the lease", What: fmt.Sprintf("%q: %s wrote with fence %d while it did not believe it held the lock (accepted %v)", w.Key, w.Client, w.Fence, w.Accepted),
				Left: l.party(h)}
		}
	}
	byKey := map[string][]Write{}
	for _, w := range h.writes {
		if w.Accepted {
			byKey[w.Key] = append(byKey[w.Key], w)
		}
	}
	for key, ws := range byKey {
		slices.SortStableFunc(ws, func(a, b Write) int { return a.At.Compare(b.At) })
		for i := 1; i < len(ws); i++ {
			if prev, w := ws[i-1], ws[i]; w.Fence < prev.Fence {
				var left, right Party
				if l := mine(prev); l != nil {
					left = l.party(h)
				}
				if l := mine(w); l != nil {
					right = l.party(h)
				}
				return &Violation{Rule: "stale write accepted", What: fmt.Sprintf("%q: the store accepted fence %d from %s after fence %d from %s", key, w.Fence, w.Client, prev.Fence, prev.Client),
					Left: left, Right: right}
			}
		}
	}
	return nil
}

func (h *History) checkTicks() *Violation {
	type state struct {
		expected   bool
		dispatched []Tick
		missed     []Tick
		claims     []Tick // claimed, committed and released, in order
	}
	tracked := false // the scheduler reported its claims
	by := map[string]*state{}
	var order []string
	for _, t := range h.ticks {
		id := t.Job + "@" + t.Tick.UTC().Format(time.RFC3339Nano)
		s := by[id]
		if s == nil {
			s = &state{}
			by[id] = s
			order = append(order, id)
		}
		switch t.Event {
		case "expected":
			s.expected = true
		case "dispatched":
			s.dispatched = append(s.dispatched, t)
		case "missed":
			s.missed = append(s.missed, t)
		case "claimed", "committed", "released":
			s.claims = append(s.claims, t)
			tracked = true
		}
	}
	tickParty := func(name string, ts []Tick) Party {
		p := Party{Name: name}
		for _, t := range ts {
			p.Events = append(p.Events, Event{t.At, fmt.Sprintf("%s %s by %s %s", t.Event, t.Tick.UTC().Format(time.RFC3339), t.Replica, t.Reason)})
		}
		return p
	}
	// with claims reported: a replica dispatches or commits a tick only
	// while it holds its claim (won before, not released since)
	holds := func(s *state, replica string, at time.Time) bool {
		held := false
		for _, c := range s.claims {
			if c.Replica != replica || c.At.After(at) {
				continue
			}
			switch c.Event {
			case "claimed":
				held = true
			case "released":
				held = false
			}
		}
		return held
	}
	// a claim is one replica's from its win until it commits or releases
	// the tick, or its lease deadline passes: two at once break the claim
	type hold struct {
		replica  string
		from, to time.Time
	}
	for _, id := range order {
		s := by[id]
		var hs []hold
		for i, c := range s.claims {
			if c.Event != "claimed" {
				continue
			}
			to := forever
			if !c.Until.IsZero() {
				to = c.Until
			}
			for _, e := range s.claims[i+1:] {
				if e.Replica == c.Replica && e.Event != "claimed" {
					to = minTime(to, e.At)
					break
				}
			}
			hs = append(hs, hold{c.Replica, c.At, to})
		}
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if a.replica != b.replica && a.from.Before(b.to) && b.from.Before(a.to) {
					return &Violation{Rule: "tick claimed twice at once", What: fmt.Sprintf("%s by %s and %s", id, a.replica, b.replica),
						Left: tickParty(a.replica, filterTicks(s.claims, a.replica)), Right: tickParty(b.replica, filterTicks(s.claims, b.replica))}
				}
			}
		}
	}
	for _, id := range order {
		s := by[id]
		if !tracked {
			break // claims not reported: nothing to hold dispatches to
		}
		events := append(append([]Tick(nil), s.claims...), s.dispatched...)
		for _, d := range events {
			if (d.Event == "dispatched" || d.Event == "committed") && !holds(s, d.Replica, d.At) {
				return &Violation{Rule: d.Event + " without a claim", What: fmt.Sprintf("%s by %s, which did not hold the tick's claim", id, d.Replica),
					Left: tickParty(d.Replica, events)}
			}
		}
	}
	for _, id := range order {
		s := by[id]
		switch {
		case len(s.dispatched) > 1:
			return &Violation{Rule: "tick dispatched twice", What: id,
				Left:  tickParty(s.dispatched[0].Replica, s.dispatched[:1]),
				Right: tickParty(s.dispatched[1].Replica, s.dispatched[1:])}
		case len(s.dispatched) == 1 && len(s.missed) > 0:
			return &Violation{Rule: "tick dispatched and recorded missed", What: id,
				Left: tickParty("dispatch", s.dispatched), Right: tickParty("miss", s.missed)}
		case s.expected && len(s.dispatched) == 0 && len(s.missed) == 0:
			return &Violation{Rule: "tick lost", What: id + " was due, never dispatched, and not recorded missed"}
		}
		for _, m := range s.missed {
			if m.Reason == "" {
				return &Violation{Rule: "tick missed without a reason", What: id + " by " + m.Replica}
			}
		}
		for _, d := range s.dispatched {
			if h.MaxEarly > 0 && d.At.Before(d.Tick.Add(-h.MaxEarly)) {
				return &Violation{Rule: "tick dispatched early", What: fmt.Sprintf("%s by %s, %v before it was due (allowed %v)", id, d.Replica, d.Tick.Sub(d.At).Round(time.Millisecond), h.MaxEarly),
					Left: tickParty(d.Replica, s.dispatched)}
			}
		}
	}
	// a dispatch inside a job's window that is no tick of its schedule
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, t := range h.ticks {
		if t.Event != "expected" {
			continue
		}
		if f, ok := first[t.Job]; !ok || t.Tick.Before(f) {
			first[t.Job] = t.Tick
		}
		if l, ok := last[t.Job]; !ok || t.Tick.After(l) {
			last[t.Job] = t.Tick
		}
	}
	for _, id := range order {
		s := by[id]
		for _, d := range s.dispatched {
			f, ok := first[d.Job]
			if ok && !s.expected && !d.Tick.Before(f) && !d.Tick.After(last[d.Job]) {
				return &Violation{Rule: "unexpected dispatch", What: id + " is no tick of the job's schedule, inside its checked window",
					Left: tickParty(d.Replica, s.dispatched)}
			}
		}
	}
	return nil
}

func (h *History) checkRuns() *Violation {
	run := func(r Run) Party {
		p := Party{Name: r.Worker, Events: []Event{{r.Start, fmt.Sprintf("starts %s@%s", r.Job, r.Tick.UTC().Format(time.RFC3339))}}}
		if !r.End.IsZero() {
			p.Events = append(p.Events, Event{r.End, "ends"})
		}
		return p
	}
	end := func(r Run) time.Time {
		if r.End.IsZero() {
			return forever // still running, or its end was not seen
		}
		return r.End
	}
	// a tick runs once: a second run after a completed one is a tick twice
	// (after a run cut off by a crash, or stopped, asynq runs it again by
	// design)
	byTick := map[string][]Run{}
	var ids []string
	for _, r := range h.runs {
		id := r.Job + "@" + r.Tick.UTC().Format(time.RFC3339Nano)
		if byTick[id] == nil {
			ids = append(ids, id)
		}
		byTick[id] = append(byTick[id], r)
	}
	for _, id := range ids {
		rs := byTick[id]
		slices.SortStableFunc(rs, func(a, b Run) int { return a.Start.Compare(b.Start) })
		for i, a := range rs {
			if a.End.IsZero() || a.Stopped {
				continue // cut off or stopped: its retry is asynq's at-least-once
			}
			for _, b := range rs[i+1:] {
				if !b.Start.Before(a.End) {
					return &Violation{Rule: "tick ran twice", What: id + " ran again after a run of it completed", Left: run(a), Right: run(b)}
				}
			}
		}
	}
	by := map[string][]Run{}
	for _, r := range h.runs {
		if r.Exclusive {
			by[r.Job] = append(by[r.Job], r)
		}
	}
	for job, rs := range by {
		slices.SortStableFunc(rs, func(a, b Run) int { return a.Start.Compare(b.Start) })
		for i := range rs {
			for _, b := range rs[i+1:] {
				if b.Start.Before(end(rs[i])) {
					return &Violation{Rule: "runs overlapped", What: fmt.Sprintf("job %q forbids overlap", job), Left: run(rs[i]), Right: run(b)}
				}
			}
		}
	}
	return nil
}

// checkChains verifies the chain rule: a run of a chained job's tick
// started after a run of that tick of each parent (Run.After) ended with
// success.
func (h *History) checkChains() *Violation {
	ended := map[string][]Run{} // job@tick -> its runs that succeeded
	for _, r := range h.runs {
		if r.Succeeded && !r.End.IsZero() {
			id := r.Job + "@" + r.Tick.UTC().Format(time.RFC3339Nano)
			ended[id] = append(ended[id], r)
		}
	}
	for _, r := range h.runs {
		for _, p := range r.After {
			id := p + "@" + r.Tick.UTC().Format(time.RFC3339Nano)
			ok := slices.ContainsFunc(ended[id], func(pr Run) bool { return !pr.End.After(r.Start) })
			if ok {
				continue
			}
			child := Party{Name: r.Worker, Events: []Event{{r.Start, fmt.Sprintf("starts %s@%s", r.Job, r.Tick.UTC().Format(time.RFC3339))}}}
			parent := Party{Name: p, Events: []Event{{r.Start, "no successful run of " + id + " ended by then"}}}
			if rs := ended[id]; len(rs) > 0 {
				parent = Party{Name: rs[0].Worker, Events: []Event{{rs[0].Start, "starts " + id}, {rs[0].End, "ends, successfully"}}}
			}
			return &Violation{Rule: "chain order", What: fmt.Sprintf("%s@%s ran before its parent %s's tick succeeded", r.Job, r.Tick.UTC().Format(time.RFC3339), p),
				Left: parent, Right: child}
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// filterTicks returns the events of ts by replica.
func filterTicks(ts []Tick, replica string) []Tick {
	var out []Tick
	for _, t := range ts {
		if t.Replica == replica {
			out = append(out, t)
		}
	}
	return out
}
