package singleton

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

// interval is one singleton run as the fake executor saw it.
type interval struct {
	replica    string
	fence      int64
	attempt    int
	start, end time.Time
	ctxEnded   bool              // the run's ctx had ended when it returned
	valid      executor.Validity // the run's term's lease
}

// held reports whether the run's term is still held: its lease has not
// ended and its validity deadline has not passed (Lease.Err checks both).
// A lease never comes back: one held now was held at every moment since the
// run started.
func (iv *interval) held() bool { return iv.valid.(*locking.Lease).Err() == nil }

// intervalExec is a fake executor shared by all replicas of a test: it
// records every run's interval and reports starts and ends on channels. Runs
// block until their ctx ends, unless exitAtOnce.
type intervalExec struct {
	exitAtOnce bool

	mu      sync.Mutex
	runs    []*interval
	started chan *interval
	ended   chan *interval
}

func newIntervalExec(exitAtOnce bool) *intervalExec {
	return &intervalExec{exitAtOnce: exitAtOnce, started: make(chan *interval, 256), ended: make(chan *interval, 256)}
}

func (f *intervalExec) Execute(ctx context.Context, job *config.Job, run jobs.Run, v executor.Validity) (jobs.Result, error) {
	if v == nil {
		return jobs.Result{}, errors.New("no validity")
	}
	iv := &interval{replica: run.Replica, fence: run.Fence, attempt: run.Attempt, start: time.Now(), valid: v}
	f.mu.Lock()
	f.runs = append(f.runs, iv)
	f.mu.Unlock()
	f.started <- iv
	var err error
	if f.exitAtOnce {
		err = errors.New("exited")
	} else {
		<-ctx.Done()
		err = context.Cause(ctx)
	}
	f.mu.Lock()
	iv.end = time.Now()
	iv.ctxEnded = ctx.Err() != nil
	f.mu.Unlock()
	f.ended <- iv
	return jobs.Result{}, err
}

// check asserts that no two recorded runs overlapped and that fences never
// decrease from one run to the next (and increase with each new term).
func (f *intervalExec) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	runs := slices.Clone(f.runs)
	slices.SortFunc(runs, func(a, b *interval) int { return a.start.Compare(b.start) })
	for i, r := range runs {
		if r.end.IsZero() {
			t.Errorf("run %d (%s fence %d) never ended", i, r.replica, r.fence)
			continue
		}
		if i == 0 {
			continue
		}
		p := runs[i-1]
		if r.start.Before(p.end) {
			t.Errorf("runs overlap: %s fence %d [%v, %v] and %s fence %d started %v",
				p.replica, p.fence, p.start.Format(time.StampMicro), p.end.Format(time.StampMicro),
				r.replica, r.fence, r.start.Format(time.StampMicro))
		}
		if r.fence < p.fence || (r.attempt == 1 && r.fence <= p.fence) {
			t.Errorf("fence went from %d to %d (attempt %d)", p.fence, r.fence, r.attempt)
		}
	}
}

// singletonCluster is one Redis and the replicas of a singleton test, each
// with its own go-redis and lock client.
type singletonCluster struct {
	srv *redistest.Server
	cfg *config.Config
}

func newSingletonCluster(t *testing.T, ttl time.Duration, b config.Backoff) *singletonCluster {
	cfg := &config.Config{
		Namespace: "baton",
		Jobs: []config.Job{{
			Name:           "pump",
			Mode:           config.ModeSingleton,
			Handler:        &config.HandlerSpec{Name: "pump"},
			LockTTL:        ttl,
			RestartBackoff: b,
		}},
	}
	return &singletonCluster{srv: redistest.New(t), cfg: cfg}
}

// replica starts a Jobs with its own lock client; both are stopped at
// cleanup (Shutdown first).
func (c *singletonCluster) replica(t *testing.T, id string, exec executor.Runner, opts ...Option) (*Jobs, *locking.Client) {
	t.Helper()
	rdb := c.srv.TestClient(t)
	locks, err := locking.New(rdb, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close() })
	s := New(c.cfg, locks, exec, append([]Option{WithReplica(id), WithLogger(worktest.Logger(t))}, opts...)...)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownSingletons(t, s) })
	return s, locks
}

func shutdownSingletons(t *testing.T, s *Jobs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil && !strings.Contains(err.Error(), "already shut down") {
		t.Errorf("Shutdown: %v", err)
	}
}

// noStart asserts that no run starts within d (that none has started, for
// d = 0).
func noStart(t *testing.T, ch <-chan *interval, d time.Duration) {
	t.Helper()
	if d == 0 {
		select {
		case iv := <-ch:
			t.Fatalf("unexpected run on %s fence %d", iv.replica, iv.fence)
		default:
			return
		}
	}
	select {
	case iv := <-ch:
		t.Fatalf("unexpected run on %s fence %d", iv.replica, iv.fence)
	case <-time.After(d):
	}
}

func TestSingletonOneAtATimeAndGracefulFailover(t *testing.T) {
	c := newSingletonCluster(t, 10*time.Second, config.Backoff{Initial: 50 * time.Millisecond, Max: time.Second})
	exec := newIntervalExec(false)
	reps := map[string]*Jobs{}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		reps[id], _ = c.replica(t, id, exec)
	}

	first := worktest.Recv(t, exec.started, "the first leader's run")
	noStart(t, exec.started, 300*time.Millisecond)

	hs, err := reps["r0"].Holders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Job != "pump" || !hs[0].Leading || hs[0].Leader.ID != first.replica || hs[0].Leader.Fence != first.fence {
		t.Fatalf("Holders = %+v, want pump led by %s fence %d", hs, first.replica, first.fence)
	}

	leader := first
	for range 2 {
		at := time.Now()
		shutdownSingletons(t, reps[leader.replica])
		delete(reps, leader.replica)
		if e := worktest.Recv(t, exec.ended, "the old run's end"); e != leader || !e.ctxEnded {
			t.Fatalf("ended %+v, want the leader's run with its ctx ended", e)
		}
		next := worktest.Recv(t, exec.started, "the next leader's run")
		if took := next.start.Sub(at); took > time.Second {
			t.Errorf("next leader started %v after the graceful stop, want < 1s (woken, not expiry)", took)
		}
		if _, ok := reps[next.replica]; !ok || next.fence <= leader.fence || next.attempt != 1 {
			t.Fatalf("next run %+v after %+v", next, leader)
		}
		noStart(t, exec.started, 200*time.Millisecond)
		leader = next
	}
	shutdownSingletons(t, reps[leader.replica])
	worktest.Recv(t, exec.ended, "the last run's end")
	exec.check(t)
	if n := len(exec.runs); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
}

// A singleton's leader is shown, with its fence and since, for as long as it
// leads (its record had expired at 10 x the lock ttl while it kept running).
// What is promised is that a read made while the term is held names its
// holder, so each read is checked against the term's lease after it
// returned: still held then, it was held throughout the read. A 200 ms lease
// may be lost on a starved host (no extension confirmed before its validity
// deadline); a read after that promises nothing about the lost term, and the
// test goes on with the replica's next term.
func TestSingletonLeaderShownWhileItLeads(t *testing.T) {
	const ttl = 200 * time.Millisecond
	c := newSingletonCluster(t, ttl, config.Backoff{Initial: 50 * time.Millisecond, Max: time.Second})
	exec := newIntervalExec(false)
	a, _ := c.replica(t, "r0", exec)
	cur := worktest.Recv(t, exec.started, "the leader's run")
	var since time.Time
	checked, unavailable, lost := 0, 0, 0
	for until := time.Now().Add(12 * ttl); time.Now().Before(until); time.Sleep(ttl / 2) {
		hs, err := a.Holders(context.Background())
		if errors.Is(err, locking.ErrUnavailable) {
			// the master did not answer within the master timeout (ttl/10):
			// the read decides nothing, as documented
			unavailable++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !cur.held() {
			lost++
			t.Logf("term with fence %d lost %v into it: %v", cur.fence, time.Since(cur.start).Round(time.Millisecond), cur.valid.(*locking.Lease).Err())
			next := worktest.Recv(t, exec.started, "the next term's run")
			if next.replica != "r0" || next.attempt != 1 || next.fence <= cur.fence {
				t.Fatalf("next run %+v after the term with fence %d was lost", next, cur.fence)
			}
			cur, since = next, time.Time{}
			continue
		}
		checked++
		if len(hs) != 1 || !hs[0].Leading || hs[0].Leader.ID != "r0" || hs[0].Leader.Fence != cur.fence || hs[0].Leader.Since.IsZero() ||
			(!since.IsZero() && !hs[0].Leader.Since.Equal(since)) {
			t.Fatalf("%v into the term, which is held: Holders = %+v, want pump led by r0 fence %d since %v", time.Since(cur.start).Round(time.Millisecond), hs, cur.fence, since)
		}
		since = hs[0].Leader.Since
	}
	select {
	case iv := <-exec.started:
		if cur.held() {
			t.Fatalf("run on %s fence %d while the term with fence %d is held", iv.replica, iv.fence, cur.fence)
		}
	default:
	}
	t.Logf("%d reads checked against a held term, %d unavailable, %d terms lost", checked, unavailable, lost)
}

// A singleton that exits is restarted by its leader after a backoff that
// doubles up to its max, keeping leadership and fence. The backoff runs on a
// simulated clock: the test reads each wait instead of timing it.
func TestSingletonRestartsWithBackoffKeepingLeadership(t *testing.T) {
	b := config.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	c := newSingletonCluster(t, 5*time.Second, b)
	exec := newIntervalExec(true)
	clk := clock.NewFake(time.Now())
	reps := map[string]*Jobs{}
	for i := range 2 {
		id := fmt.Sprintf("r%d", i)
		reps[id], _ = c.replica(t, id, exec, WithClock(clk))
	}
	var runs []*interval
	for i, want := range []time.Duration{50, 100, 200, 200, 200, 0} {
		runs = append(runs, worktest.Recv(t, exec.started, fmt.Sprintf("run %d", i+1)))
		if want == 0 {
			break
		}
		want *= time.Millisecond
		if err := clk.BlockUntil(1); err != nil {
			t.Fatalf("after run %d: %v", i+1, err)
		}
		if got, _ := clk.Next(); got != want {
			t.Errorf("backoff after run %d = %v, want %v", i+1, got, want)
		}
		clk.Advance(want - time.Millisecond)
		noStart(t, exec.started, 0)
		clk.Advance(time.Millisecond)
	}
	for i, r := range runs {
		if r.replica != runs[0].replica || r.fence != runs[0].fence || r.attempt != i+1 {
			t.Errorf("run %d: %s fence %d attempt %d, want %s fence %d attempt %d",
				i+1, r.replica, r.fence, r.attempt, runs[0].replica, runs[0].fence, i+1)
		}
	}
	leader := reps[runs[0].replica]
	shutdownSingletons(t, leader)
	if st := leader.Stats(); st.Started < 6 || st.Exited < 5 || st.Lost != 0 {
		t.Errorf("leader stats %+v", st)
	}
	exec.check(t)
}

func TestSingletonCrashFailoverAfterTTL(t *testing.T) {
	const ttl = 500 * time.Millisecond
	c := newSingletonCluster(t, ttl, config.Backoff{Initial: 50 * time.Millisecond, Max: time.Second})
	exec := newIntervalExec(false)
	locks := map[string]*locking.Client{}
	reps := map[string]*Jobs{}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		reps[id], locks[id] = c.replica(t, id, exec)
	}
	first := worktest.Recv(t, exec.started, "the first leader's run")

	at := time.Now()
	locks[first.replica].Close() // crash-like: no resign, the keys expire at their ttl
	old := worktest.Recv(t, exec.ended, "the old run's end")
	if old != first || !old.ctxEnded {
		t.Fatalf("ended %+v, want the first run with its ctx ended", old)
	}
	next := worktest.Recv(t, exec.started, "the takeover")
	took := next.start.Sub(at)
	if next.replica == first.replica || next.fence <= first.fence {
		t.Fatalf("takeover %+v after %+v", next, first)
	}
	if took < ttl/3 || took > ttl+1500*time.Millisecond {
		t.Errorf("takeover %v after the crash, want about the ttl (%v)", took, ttl)
	}
	if !old.end.Before(next.start) {
		t.Errorf("old run ended %v, not before the new one started %v", old.end, next.start)
	}
	shutdownSingletons(t, reps[first.replica])
	if st := reps[first.replica].Stats(); st.Started != 1 || st.Lost != 1 {
		t.Errorf("crashed replica stats %+v, want 1 started, 1 lost", st)
	}
	// the standby goes first: stopped after the new leader, it would be
	// woken by its resign and start a run of its own, which the check
	// below would find under way
	for id, r := range reps {
		if id != first.replica && id != next.replica {
			shutdownSingletons(t, r)
		}
	}
	shutdownSingletons(t, reps[next.replica])
	worktest.Recv(t, exec.ended, "the new run's end")
	exec.check(t)
}

// cannotStartExec is an executor on a replica where the job's command is
// missing: every run fails to start.
type cannotStartExec struct{ calls chan struct{} }

func (c cannotStartExec) Execute(context.Context, *config.Job, jobs.Run, executor.Validity) (jobs.Result, error) {
	select {
	case c.calls <- struct{}{}:
	default:
	}
	return jobs.Result{}, fmt.Errorf("executor: exec: %w", exec.ErrNotFound)
}

// A leader whose command cannot start resigns after a few quick failures, so
// a replica where it can start takes over.
func TestSingletonThatCannotStartResigns(t *testing.T) {
	c := newSingletonCluster(t, 10*time.Second, config.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond})
	bad := cannotStartExec{calls: make(chan struct{}, 16)}
	c.replica(t, "broken", bad)
	worktest.Recv(t, bad.calls, "the broken replica's first attempt") // it leads
	good := newIntervalExec(false)
	c.replica(t, "healthy", good)
	run := worktest.Recv(t, good.started, "the healthy replica's run")
	if run.replica != "healthy" {
		t.Fatalf("run on %s", run.replica)
	}
}
