package locking_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func election(t *testing.T, c *locking.Client, name string, ttl time.Duration) *locking.Election {
	t.Helper()
	e, err := c.Election(name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type campaignResult struct {
	term *locking.Term
	err  error
	at   time.Time
}

func campaign(ctx context.Context, e *locking.Election, id string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		t, err := e.Campaign(ctx, id)
		ch <- campaignResult{t, err, time.Now()}
	}()
	return ch
}

func observe(t *testing.T, e *locking.Election) (locking.Leader, bool) {
	t.Helper()
	l, ok, err := e.Leader(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return l, ok
}

// handover: one of two candidates leads, Observe shows it, Resign wakes the
// other at once (the ttl is 20s: a polling waiter would take that long).
func handover(t *testing.T, servers []*redistest.Server) {
	ctx := testCtx(t)
	a := newClient(t, clientsOf(t, servers...))
	b := newClient(t, clientsOf(t, servers...))
	ea := election(t, a, "handover", 20*time.Second)
	eb := election(t, b, "handover", 20*time.Second)

	if _, ok := observe(t, eb); ok {
		t.Fatal("a leader before any campaign")
	}
	ta, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := observe(t, eb)
	// Campaign returns at a quorum of records, each with its master's
	// clock; a later master's record may be read too, so the observed start
	// is the earliest of at least those: never after the campaign's
	if since := ta.Leader().Since; !ok || l.ID != "a" || l.Fence != ta.Fence() || l.Since.After(since) || since.Sub(l.Since) > time.Second {
		t.Fatalf("observed %+v %v, want a with fence %d since %v (or a master's moment before it)", l, ok, ta.Fence(), since)
	}
	if d := time.Since(l.Since); d < -time.Second || d > 10*time.Second {
		t.Fatalf("since %v is %v ago", l.Since, d)
	}

	chB := campaign(ctx, eb, "b")
	select {
	case r := <-chB:
		t.Fatalf("second candidate leads while the first does: %v %v", r.term, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	resigned := time.Now()
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var r campaignResult
	select {
	case r = <-chB:
	case <-time.After(time.Second):
		t.Fatal("next candidate not leading 1s after resign: not woken")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("handover took %v", r.at.Sub(resigned))
	tb := r.term
	if tb.Fence() <= ta.Fence() {
		t.Fatalf("fence %d after %d", tb.Fence(), ta.Fence())
	}
	select {
	case <-ta.Done():
	default:
		t.Fatal("resigned term not done")
	}
	if !errors.Is(ta.Err(), locking.ErrReleased) {
		t.Fatalf("resigned term's err %v", ta.Err())
	}
	if err := ta.Resign(ctx); !errors.Is(err, locking.ErrNotHeld) {
		t.Fatalf("second resign: %v, want ErrNotHeld", err)
	}
	l, ok = observe(t, ea)
	if !ok || l.ID != "b" || l.Fence != tb.Fence() {
		t.Fatalf("observed %+v %v, want b with fence %d", l, ok, tb.Fence())
	}
	if tb.Err() != nil || tb.Context().Err() != nil || !tb.Deadline().After(time.Now()) || tb.Lease().Fence() != tb.Fence() {
		t.Fatalf("new term not live: %v %v", tb.Err(), tb.Deadline())
	}
	if err := tb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := observe(t, ea); ok {
		t.Fatal("a leader after everyone resigned")
	}
}

func TestElectionHandover(t *testing.T) {
	handover(t, []*redistest.Server{redistest.New(t)})
}

func TestElectionHandoverQuorum(t *testing.T) {
	handover(t, redistest.NewN(t, 3))
}

// A leader is shown while it leads, however long: its record lives with its
// lease (it expired at 10 x the ttl however long the term went on). What is
// promised is that a read made while the term is held names its leader, so
// each read is checked against the term after it returned: still held then,
// it was held throughout the read. A 300 ms lease may be lost on a starved
// host (no extension confirmed before its validity deadline); a read after
// that promises nothing about the lost term, and the candidate campaigns
// again and the test goes on with the new term.
func leaderShownWhileLeading(t *testing.T, servers []*redistest.Server) {
	ctx := testCtx(t)
	const ttl = 300 * time.Millisecond
	e := election(t, newClient(t, clientsOf(t, servers...)), "long", ttl)
	obs := election(t, newClient(t, clientsOf(t, servers...)), "long", ttl)
	term, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	checked, lost := 0, 0
	for until := time.Now().Add(12 * ttl); time.Now().Before(until); time.Sleep(ttl / 2) {
		l, ok := observe(t, obs)
		if err := term.Err(); err != nil {
			lost++
			t.Logf("term with fence %d lost %v into it: %v", term.Fence(), time.Since(term.Leader().Since).Round(time.Millisecond), err)
			prev := term.Fence()
			if term, err = e.Campaign(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if term.Fence() <= prev {
				t.Fatalf("fence %d after %d", term.Fence(), prev)
			}
			continue
		}
		checked++
		// the earliest of the masters' clocks: never after the term's own
		if since := term.Leader().Since; !ok || l.ID != "a" || l.Fence != term.Fence() || l.Since.After(since) || since.Sub(l.Since) > time.Second {
			t.Fatalf("%v into the term, which is held: observed %+v %v, want a, fence %d, since %v", time.Since(term.Leader().Since).Round(time.Millisecond), l, ok, term.Fence(), term.Leader().Since)
		}
	}
	t.Logf("%d reads checked against a held term, %d terms lost", checked, lost)
	if err := term.Resign(ctx); err != nil {
		if !errors.Is(err, locking.ErrNotHeld) {
			t.Fatal(err)
		}
		t.Logf("the last term was lost before its resign: %v", err)
		return
	}
	if _, ok := observe(t, obs); ok {
		t.Fatal("a leader after its resign")
	}
}

func TestElectionLeaderShownWhileLeading(t *testing.T) {
	t.Parallel()
	leaderShownWhileLeading(t, []*redistest.Server{redistest.New(t)})
}

func TestElectionLeaderShownWhileLeadingQuorum(t *testing.T) {
	t.Parallel()
	leaderShownWhileLeading(t, redistest.NewN(t, 3))
}

// A leader that dies without resigning (its client closed) is replaced after
// the ttl, and its record is not reported once its key expired.
func TestElectionLeaderCrash(t *testing.T) {
	s := redistest.New(t)
	ctx := testCtx(t)
	rdb := s.TestClient(t)
	const ttl = 400 * time.Millisecond
	a := newClient(t, clientsOf(t, s))
	b := newClient(t, clientsOf(t, s))
	ea := election(t, a, "crash", ttl)
	eb := election(t, b, "crash", ttl)

	ta, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // crash-like: no resign, the key stays until its ttl
		t.Fatal(err)
	}
	waitDone(t, ta.Lease(), time.Second)
	if !errors.Is(ta.Err(), locking.ErrClosed) {
		t.Fatalf("term err %v", ta.Err())
	}
	if err := ta.Resign(ctx); !errors.Is(err, locking.ErrNotHeld) {
		t.Fatalf("resign of a lost term: %v, want ErrNotHeld", err)
	}

	// nobody campaigns: watch the dead leader's key expire
	lockKey := "baton:lock:{election:crash}"
	poll.Require(t, 30*time.Second, "a's key to expire", func() bool {
		n, err := rdb.Exists(ctx, lockKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		l, ok := observe(t, eb)
		if n == 0 {
			return true
		}
		if ok && l.ID != "a" {
			t.Fatalf("observed %+v while a's key lives", l)
		}
		return false
	})
	if n := rdb.Exists(ctx, lockKey+":leader").Val(); n != 1 {
		t.Fatalf("stale leader record gone (%d): the test proves nothing", n)
	}
	for range 3 {
		if l, ok := observe(t, eb); ok {
			t.Fatalf("dead leader reported after its lease expired: %+v", l)
		}
	}
	tb, err := eb.Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if tb.Fence() <= ta.Fence() {
		t.Fatalf("fence %d after %d", tb.Fence(), ta.Fence())
	}
	if l, ok := observe(t, eb); !ok || l.ID != "b" {
		t.Fatalf("observed %+v %v, want b", l, ok)
	}
	if err := tb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiting candidate takes over after the ttl when the leader dies.
func TestElectionWaiterReplacesDeadLeader(t *testing.T) {
	s := redistest.New(t)
	ctx := testCtx(t)
	const ttl = 400 * time.Millisecond
	a := newClient(t, clientsOf(t, s))
	b := newClient(t, clientsOf(t, s))
	ea := election(t, a, "replace", ttl)
	eb := election(t, b, "replace", ttl)
	ta, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	chB := campaign(ctx, eb, "b")
	registered(t, s.TestClient(t), "election:replace", 1) // b waits for a's term to end
	closed := time.Now()
	_ = a.Close()
	var r campaignResult
	select {
	case r = <-chB:
	case <-time.After(5 * time.Second):
		t.Fatal("dead leader not replaced")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(closed); d > ttl+time.Second {
		t.Fatalf("replaced after %v, ttl %v", d, ttl)
	}
	if r.term.Fence() <= ta.Fence() {
		t.Fatalf("fence %d after %d", r.term.Fence(), ta.Fence())
	}
	// the new leader's record wins; the old one was overwritten
	if l, ok := observe(t, eb); !ok || l.ID != "b" || l.Fence != r.term.Fence() {
		t.Fatalf("observed %+v %v, want b", l, ok)
	}
	if err := r.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionCampaignHonoursContext(t *testing.T) {
	s := redistest.New(t)
	ctx := testCtx(t)
	a := newClient(t, clientsOf(t, s))
	b := newClient(t, clientsOf(t, s))
	ta, err := election(t, a, "ctx", 10*time.Second).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	eb := election(t, b, "ctx", 10*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = eb.Campaign(wctx, "b")
	if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("campaign returned after %v", d)
	}
	if l, ok := observe(t, eb); !ok || l.ID != "a" {
		t.Fatalf("observed %+v %v, want a", l, ok)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionInvalid(t *testing.T) {
	c := newClient(t, []*redis.Client{redistest.New(t).TestClient(t)})
	if _, err := c.Election("", time.Second); !errors.Is(err, locking.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := c.Election("x", time.Millisecond); !errors.Is(err, locking.ErrInvalid) {
		t.Fatalf("short ttl: %v", err)
	}
	e := election(t, c, "x", time.Second)
	if _, err := e.Campaign(testCtx(t), ""); !errors.Is(err, locking.ErrInvalid) {
		t.Fatalf("empty id: %v", err)
	}
}

// next receives the next leader from an Observe stream, failing the test
// after d.
func next(t *testing.T, ch <-chan locking.Leader, d time.Duration) locking.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return l
	case <-time.After(d):
		t.Fatalf("no leader observed within %v", d)
		return locking.Leader{}
	}
}

// Observe streams the leaders: the current one, then each new one as its
// term begins (after a resign, and after a campaign where nobody led), once
// per term, and its channel closes when ctx ends. The ttl is 20s and each
// leader is seen within 2s: the observer is woken by the new leader's
// announcement, not by re-reading at the ttl.
func observeStream(t *testing.T, servers []*redistest.Server) {
	ctx := testCtx(t)
	a := newClient(t, clientsOf(t, servers...))
	b := newClient(t, clientsOf(t, servers...))
	o := newClient(t, clientsOf(t, servers...))
	const ttl = 20 * time.Second
	ea, eb, eo := election(t, a, "stream", ttl), election(t, b, "stream", ttl), election(t, o, "stream", ttl)

	ta, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders := eo.Observe(octx)
	if l := next(t, leaders, 2*time.Second); l.ID != "a" || l.Fence != ta.Fence() {
		t.Fatalf("first observed %+v, want the current leader a with fence %d", l, ta.Fence())
	}

	chB := campaign(ctx, eb, "b")
	registered(t, clientsOf(t, servers[0])[0], "election:stream", 1)
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-chB
	if r.err != nil {
		t.Fatal(r.err)
	}
	if l := next(t, leaders, 2*time.Second); l.ID != "b" || l.Fence != r.term.Fence() {
		t.Fatalf("after a resign observed %+v, want b with fence %d", l, r.term.Fence())
	}

	// nobody leads for a while: nothing is sent; then a campaigns again
	if err := r.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	ta2, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l := next(t, leaders, 2*time.Second); l.ID != "a" || l.Fence != ta2.Fence() || l.Fence <= r.term.Fence() {
		t.Fatalf("after a new campaign observed %+v, want a's new term with fence %d", l, ta2.Fence())
	}

	stop()
	select {
	case l, ok := <-leaders:
		if ok {
			t.Fatalf("observed %+v after ctx ended, want the channel closed", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe's channel still open 5s after ctx ended")
	}
	if err := ta2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionObserveStreamsLeaders(t *testing.T) {
	observeStream(t, []*redistest.Server{redistest.New(t)})
}

func TestElectionObserveStreamsLeadersQuorum(t *testing.T) {
	observeStream(t, redistest.NewN(t, 3))
}

// Observe's channel closes when the client closes, and is closed at once
// on a closed client.
func TestElectionObserveEndsWithClient(t *testing.T) {
	s := redistest.New(t)
	o, err := locking.New(s.TestClient(t), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	e := election(t, o, "closing", time.Second)
	leaders := e.Observe(testCtx(t))
	_ = o.Close()
	select {
	case _, ok := <-leaders:
		if ok {
			t.Fatal("a leader observed where nobody campaigned")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe's channel still open 5s after Close")
	}
	if _, ok := <-e.Observe(testCtx(t)); ok {
		t.Fatal("Observe on a closed client sent a leader, want its channel closed")
	}
}
