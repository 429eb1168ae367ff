package scheduler

// Review of the restructuring of claim.go (7b41a71..HEAD): keys.go,
// scripts.go, claim.go and dispatch.go, with a claimed{idx, fence, synced}
// per owned tick instead of the parallel owned/fences/pos slices. These
// tests drive process() on real redis-servers with crafted batches whose
// ticks end differently (done, busy, paused, owned with agreeing or diverging
// fences, a fence write-back whose reply is lost, a lease taken over while
// waiting for a dispatch slot, a commit-first record refused, a failed
// dispatch, a shutdown), and check that every owned tick is dispatched with
// its own job, instant and fence, committed once, and every other one
// released and retried, never dispatched. Self-contained: only redistest.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// rvDisp records dispatched ticks; before may fail or hold a dispatch.
type rvDisp struct {
	mu     sync.Mutex
	got    []Tick
	tries  []Tick // every call, failed ones too
	before func(ctx context.Context, t Tick) error
}

func (d *rvDisp) Dispatch(ctx context.Context, t Tick) error {
	d.mu.Lock()
	d.tries = append(d.tries, t)
	d.mu.Unlock()
	if d.before != nil {
		if err := d.before(ctx, t); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.got = append(d.got, t)
	d.mu.Unlock()
	return nil
}

func (d *rvDisp) dispatched() map[string]Tick {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Tick{}
	for _, t := range d.got {
		if _, dup := out[t.Job]; dup {
			panic("tick of " + t.Job + " dispatched twice")
		}
		out[t.Job] = t
	}
	return out
}

func (d *rvDisp) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// rvSetup starts n redis-servers and a scheduler over them (not Run: the
// tests call process directly).
func rvSetup(t *testing.T, n int, names []string, commitFirst map[string]bool, d Dispatcher, opts ...Option) (*Scheduler, []*redis.Client) {
	t.Helper()
	servers := redistest.NewN(t, n)
	rdbs := make([]*redis.Client, n)
	ms := make([]redis.UniversalClient, n)
	for i, s := range servers {
		rdbs[i] = s.TestClient(t)
		ms[i] = rdbs[i]
	}
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	if err := locks.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	sched, err := ParseSchedule("@every 1s", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, name := range names {
		jobs = append(jobs, Job{Name: name, Schedule: sched, StartingDeadline: time.Minute, CommitFirst: commitFirst[name]})
	}
	s, err := New(locks, jobs, d, append([]Option{WithReplica("rv")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, rdbs
}

// rvTick is a tick due a moment ago: inside the starting deadline, not early.
func rvTick() time.Time { return time.Now().Add(-time.Second).Truncate(time.Second).UTC() }

func rvBatch(s *Scheduler, at time.Time, names ...string) []item {
	var b []item
	for _, n := range names {
		b = append(b, item{job: s.jobs[n], at: at, fireAt: at})
	}
	return b
}

// rvRetries drains what process rescheduled.
func rvRetries(s *Scheduler) map[string]item {
	out := map[string]item{}
	for {
		select {
		case its := <-s.retry:
			for _, it := range its {
				out[it.job.Name] = it
			}
		default:
			return out
		}
	}
}

func rvGet(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func rvSet(t *testing.T, rdb *redis.Client, key, val string, ttl time.Duration) {
	t.Helper()
	if err := rdb.Set(context.Background(), key, val, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}

var rvTokenRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// rvLoseRaiseReplies drops the replies (not the commands) of the fence
// write-backs (raise.lua: one key, the job's fence counter) of one job on
// one master: the write happens, its answer is lost.
type rvLoseRaiseReplies struct {
	fenceKey string
	armed    *atomic.Bool
}

func (h rvLoseRaiseReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h rvLoseRaiseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h rvLoseRaiseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !h.armed.Load() {
			return err
		}
		for _, c := range cmds {
			a := c.Args()
			if len(a) >= 4 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[2]) == "1" && a[3] == h.fenceKey {
				c.SetErr(errors.New("rv: reply lost"))
			}
		}
		return err
	}
}

// One batch on three masters whose ticks end every way a claim can: done
// (on one master), busy (leased elsewhere), paused (on a quorum), owned with
// agreeing fences, owned with diverging fences (written back to a
// majority), and owned with diverging fences whose write-back replies are
// lost on two masters. Only the two owned-and-synced ticks are dispatched,
// each with its own job and fence; they are committed on every master; the
// lost one is released and retried with its token, and its retry is
// dispatched with a fence above every fence issued before (G4); the busy one
// is retried, its holder's lease untouched (G5).
func TestMixedBatchDispatchesOnlySyncedOwnedTicksWithTheirOwnFences(t *testing.T) {
	d := &rvDisp{}
	names := []string{"rv-done", "rv-busy", "rv-unsynced", "rv-agree", "rv-paused", "rv-lostraise"}
	s, rdbs := rvSetup(t, 3, names, nil, d)
	at := rvTick()
	key := func(n string) string { return s.jobs[n].keys.tickKey(at) }
	fence := func(n string) string { return s.jobs[n].keys.fence }
	const day = 24 * time.Hour
	rvSet(t, rdbs[1], key("rv-done"), "done", time.Minute)
	for _, r := range rdbs {
		rvSet(t, r, key("rv-busy"), "other-owner", time.Minute)
		rvSet(t, r, fence("rv-agree"), "3000000000000000", day)
	}
	rvSet(t, rdbs[0], fence("rv-unsynced"), "4000000000000000", day)
	rvSet(t, rdbs[1], fence("rv-unsynced"), "3000000000000000", day)
	rvSet(t, rdbs[2], fence("rv-unsynced"), "3000000000000000", day)
	rvSet(t, rdbs[0], fence("rv-lostraise"), "5000000000000000", day)
	rvSet(t, rdbs[1], fence("rv-lostraise"), "3000000000000000", day)
	rvSet(t, rdbs[2], fence("rv-lostraise"), "3000000000000000", day)
	rvSet(t, rdbs[0], s.jobs["rv-paused"].keys.paused, "1", 0)
	rvSet(t, rdbs[1], s.jobs["rv-paused"].keys.paused, "1", 0)
	var armed atomic.Bool
	armed.Store(true)
	rdbs[1].AddHook(rvLoseRaiseReplies{fence("rv-lostraise"), &armed})
	rdbs[2].AddHook(rvLoseRaiseReplies{fence("rv-lostraise"), &armed})

	batch := rvBatch(s, at, names...)
	s.runBatch(context.Background(), batch)

	got := d.dispatched()
	if len(got) != 2 {
		t.Fatalf("dispatched %v, want rv-unsynced and rv-agree only", got)
	}
	for n, want := range map[string]int64{"rv-unsynced": 4000000000000001, "rv-agree": 3000000000000001} {
		tk, ok := got[n]
		if !ok {
			t.Errorf("%s not dispatched (got %v)", n, got)
			continue
		}
		if !tk.At.Equal(at) || tk.Fence != want || tk.Replica != "rv" || !rvTokenRE.MatchString(tk.RunID) {
			t.Errorf("%s dispatched as %+v, want at %v fence %d, a 32-hex run id", n, tk, at, want)
		}
		for m, r := range rdbs {
			if v := rvGet(t, r, key(n)); v != "done" {
				t.Errorf("%s on master %d: %q, want done", n, m, v)
			}
			if v := rvGet(t, r, s.jobs[n].keys.mark); v != strconv.FormatInt(at.UnixMilli(), 10) {
				t.Errorf("%s mark on master %d: %q", n, m, v)
			}
		}
	}
	for m, r := range rdbs {
		if c, _ := strconv.ParseInt(rvGet(t, r, fence("rv-unsynced")), 10, 64); c < 4000000000000001 {
			t.Errorf("rv-unsynced fence counter on master %d is %d, below the fence dispatched", m, c)
		}
		if v := rvGet(t, r, key("rv-busy")); v != "other-owner" {
			t.Errorf("rv-busy lease on master %d: %q, want the other owner's", m, v)
		}
		if v := rvGet(t, r, key("rv-lostraise")); v != "<none>" {
			t.Errorf("rv-lostraise on master %d: %q, want released", m, v)
		}
	}
	st := s.Stats()
	if st.Owned != 3 || st.Done != 1 || st.Busy != 1 || st.Paused != 1 || st.Dispatched != 2 || st.Missed != 0 || st.DispatchErrors != 0 || st.CommitErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	retries := rvRetries(s)
	if len(retries) != 2 {
		t.Fatalf("retries %v, want rv-busy and rv-lostraise", retries)
	}
	lost, ok := retries["rv-lostraise"]
	if !ok || lost.token != batch[5].token || lost.attempts != 1 || !lost.at.Equal(at) {
		t.Fatalf("rv-lostraise retry %+v (claimed with token %s)", lost, batch[5].token)
	}
	if _, ok := retries["rv-busy"]; !ok {
		t.Fatal("rv-busy not retried")
	}

	// the retry, replies no longer lost: dispatched once, fence above all
	armed.Store(false)
	s.runBatch(context.Background(), []item{lost})
	got = d.dispatched()
	tk, ok := got["rv-lostraise"]
	if !ok {
		t.Fatalf("rv-lostraise not dispatched on its retry (got %v, retries %v)", got, rvRetries(s))
	}
	if tk.Fence <= 5000000000000001 {
		t.Errorf("rv-lostraise retry fence %d, want above 5000000000000001 (issued to the lost claim)", tk.Fence)
	}
	for m, r := range rdbs {
		if v := rvGet(t, r, key("rv-lostraise")); v != "done" {
			t.Errorf("rv-lostraise on master %d after its retry: %q", m, v)
		}
	}
}

// Parallelism 1: while the first ticks are being dispatched (each within
// the lease ttl that bounds a dispatch), the others wait for a slot and
// their leases are extended every third of the lease ttl. The lease of one
// waiting tick is taken over by another replica (its lease expired, say):
// at the next extension it is dropped, released token-checked (the other
// replica's lease stays) and retried, never dispatched here; the last one
// stays leased past its first lease ttl and is dispatched with its own
// fence (not the dropped tick's, nor its neighbours').
func TestLeaseLostWhileWaitingIsDroppedAndTheRestKeepTheirFences(t *testing.T) {
	const ttl = 600 * time.Millisecond
	entered := make(chan struct{}, 1)
	d := &rvDisp{before: func(ctx context.Context, tk Tick) error {
		if tk.Job == "rv-a" || tk.Job == "rv-x" {
			if tk.Job == "rv-a" {
				entered <- struct{}{}
			}
			select {
			case <-time.After(ttl * 4 / 5):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	names := []string{"rv-a", "rv-b", "rv-x", "rv-c"}
	s, rdbs := rvSetup(t, 1, names, nil, d, WithDispatchParallelism(1), WithTickLeaseTTL(ttl))
	rdb := rdbs[0]
	at := rvTick()
	for i, n := range names {
		rvSet(t, rdb, s.jobs[n].keys.fence, strconv.Itoa(5+i)+"000000000000000", time.Hour)
	}
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(context.Background(), rvBatch(s, at, names...))
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("rv-a never dispatched")
	}
	keyB, keyC := s.jobs["rv-b"].keys.tickKey(at), s.jobs["rv-c"].keys.tickKey(at)
	rvSet(t, rdb, keyB, "other-owner", time.Minute)
	time.Sleep(time.Until(began.Add(ttl + ttl/3))) // rv-x being dispatched; rv-c waits past its first lease
	if v := rvGet(t, rdb, keyC); !rvTokenRE.MatchString(v) {
		t.Errorf("rv-c's lease while it waits, past its first ttl: %q (want its token: extended)", v)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return")
	}
	got := d.dispatched()
	if _, ok := got["rv-b"]; ok || len(got) != 3 {
		t.Fatalf("dispatched %v, want rv-a, rv-x and rv-c", got)
	}
	for i, n := range names {
		if n == "rv-b" {
			continue
		}
		if want, _ := strconv.ParseInt(strconv.Itoa(5+i)+"000000000000001", 10, 64); got[n].Fence != want {
			t.Errorf("%s dispatched with fence %d, want %d", n, got[n].Fence, want)
		}
	}
	if v := rvGet(t, rdb, keyB); v != "other-owner" {
		t.Errorf("rv-b: %q, want the other replica's lease", v)
	}
	if v := rvGet(t, rdb, keyC); v != "done" {
		t.Errorf("rv-c: %q, want done", v)
	}
	if r := rvRetries(s); len(r) != 1 || r["rv-b"].job == nil {
		t.Errorf("retries %v, want rv-b only", r)
	}
	if st := s.Stats(); st.Owned != 4 || st.Dispatched != 3 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Local mode commits first: a commit-first tick is handed to the
// dispatcher only once its record is on a quorum (the dispatcher reads it
// there); one whose lease was taken over on two of three masters before
// its record is written is not dispatched at all, counted as a commit
// error, and retried.
func TestCommitFirstRunsOnlyAfterItsRecord(t *testing.T) {
	var rdbs []*redis.Client
	var s *Scheduler
	var at time.Time
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	var doneAtDispatch atomic.Int64
	d := &rvDisp{before: func(ctx context.Context, tk Tick) error {
		n := 0
		for _, r := range rdbs {
			if v, _ := r.Get(ctx, s.jobs[tk.Job].keys.tickKey(at)).Result(); v == "done" {
				n++
			}
		}
		doneAtDispatch.Store(int64(n))
		if tk.Job == "rv-l1" {
			entered <- struct{}{}
			<-gate
		}
		return nil
	}}
	s, rdbs = rvSetup(t, 3, []string{"rv-l1", "rv-l2"}, map[string]bool{"rv-l1": true, "rv-l2": true}, d,
		WithDispatchParallelism(1), WithTickLeaseTTL(30*time.Second))
	at = rvTick()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(context.Background(), rvBatch(s, at, "rv-l1", "rv-l2"))
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("rv-l1 never dispatched")
	}
	if n := doneAtDispatch.Load(); n < 2 {
		t.Errorf("rv-l1 dispatched with its record on %d of 3 masters, want a quorum first", n)
	}
	key2 := s.jobs["rv-l2"].keys.tickKey(at)
	rvSet(t, rdbs[1], key2, "other-owner", time.Minute)
	rvSet(t, rdbs[2], key2, "other-owner", time.Minute)
	close(gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return")
	}
	got := d.dispatched()
	if _, ok := got["rv-l2"]; ok || len(got) != 1 {
		t.Fatalf("dispatched %v, want rv-l1 only", got)
	}
	if st := s.Stats(); st.Owned != 2 || st.Dispatched != 1 || st.CommitErrors != 1 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	for m := 1; m < 3; m++ {
		if v := rvGet(t, rdbs[m], key2); v != "other-owner" {
			t.Errorf("rv-l2 on master %d: %q, want the other owner's lease", m, v)
		}
	}
	if r := rvRetries(s); len(r) != 1 || r["rv-l2"].job == nil {
		t.Errorf("retries %v, want rv-l2", r)
	}
}

// A failed dispatch releases the tick and retries it with its token; a
// dispatch answered ErrAlreadyDispatched counts as dispatched and is
// committed. The retry is dispatched once, with a fence above the failed
// attempt's (a new claim), and committed.
func TestFailedDispatchIsRetriedOnceAlreadyDispatchedIsCommitted(t *testing.T) {
	var failed atomic.Bool
	d := &rvDisp{}
	d.before = func(ctx context.Context, tk Tick) error {
		switch tk.Job {
		case "rv-fail":
			if failed.CompareAndSwap(false, true) {
				return errors.New("queue down")
			}
		case "rv-dup":
			return fmt.Errorf("conflict: %w", ErrAlreadyDispatched)
		}
		return nil
	}
	s, rdbs := rvSetup(t, 1, []string{"rv-ok", "rv-fail", "rv-dup"}, nil, d)
	rdb := rdbs[0]
	at := rvTick()
	batch := rvBatch(s, at, "rv-ok", "rv-fail", "rv-dup")
	s.runBatch(context.Background(), batch)
	for n, want := range map[string]string{"rv-ok": "done", "rv-dup": "done", "rv-fail": "<none>"} {
		if v := rvGet(t, rdb, s.jobs[n].keys.tickKey(at)); v != want {
			t.Errorf("%s: %q, want %s", n, v, want)
		}
	}
	if st := s.Stats(); st.Owned != 3 || st.Dispatched != 2 || st.DispatchErrors != 1 {
		t.Errorf("stats after the first batch %+v", st)
	}
	r := rvRetries(s)
	retry, ok := r["rv-fail"]
	if len(r) != 1 || !ok || retry.token != batch[1].token || retry.attempts != 1 {
		t.Fatalf("retries %+v", r)
	}
	s.runBatch(context.Background(), []item{retry})
	if v := rvGet(t, rdb, s.jobs["rv-fail"].keys.tickKey(at)); v != "done" {
		t.Errorf("rv-fail after its retry: %q", v)
	}
	got := d.dispatched()
	if len(got) != 2 || got["rv-fail"].Job == "" {
		t.Fatalf("dispatched %v", got)
	}
	var first int64
	d.mu.Lock()
	for _, tk := range d.tries {
		if tk.Job == "rv-fail" && first == 0 {
			first = tk.Fence
		}
	}
	d.mu.Unlock()
	if got["rv-fail"].Fence <= first {
		t.Errorf("retry fence %d not above the failed attempt's %d", got["rv-fail"].Fence, first)
	}
	if st := s.Stats(); st.Owned != 4 || st.Dispatched != 3 || st.DispatchErrors != 1 {
		t.Errorf("stats after the retry %+v", st)
	}
}

// Shutdown while ticks wait for a dispatch slot: the waiting ones are
// released, not dispatched; the one being dispatched, cut short, is
// released too; nothing is recorded done.
func TestShutdownReleasesWaitingTicks(t *testing.T) {
	entered := make(chan struct{}, 1)
	d := &rvDisp{before: func(ctx context.Context, tk Tick) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}}
	s, rdbs := rvSetup(t, 1, []string{"rv-x", "rv-y", "rv-z"}, nil, d, WithDispatchParallelism(1))
	at := rvTick()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(ctx, rvBatch(s, at, "rv-x", "rv-y", "rv-z"))
	}()
	<-entered
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return after shutdown")
	}
	if n := d.count(); n != 0 {
		t.Errorf("%d dispatched", n)
	}
	var tried []string
	d.mu.Lock()
	for _, tk := range d.tries {
		tried = append(tried, tk.Job)
	}
	d.mu.Unlock()
	sort.Strings(tried)
	if fmt.Sprint(tried) != "[rv-x]" {
		t.Errorf("dispatch calls %v, want rv-x only", tried)
	}
	for _, n := range []string{"rv-x", "rv-y", "rv-z"} {
		if v := rvGet(t, rdbs[0], s.jobs[n].keys.tickKey(at)); v != "<none>" {
			t.Errorf("%s after shutdown: %q, want released", n, v)
		}
	}
	if st := s.Stats(); st.Dispatched != 0 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}
