package baton_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/schedule"
)

// runCounter counts the runs of a Go handler by job and tick.
type runCounter struct {
	mu       sync.Mutex
	byTick   map[string]int
	payloads map[string]string
}

func newRunCounter() *runCounter {
	return &runCounter{byTick: map[string]int{}, payloads: map[string]string{}}
}

func (c *runCounter) handler(ctx context.Context, run jobs.Run) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byTick[run.Job+" "+run.Tick.UTC().Format(time.RFC3339)]++
	c.payloads[run.Job] = string(run.Payload)
	return nil
}

// ticks returns the ticks run of job, and the most runs of one tick.
func (c *runCounter) ticks(job string) (n, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.byTick {
		if strings.HasPrefix(k, job+" ") {
			n++
			most = max(most, v)
		}
	}
	return n, most
}

// countingReplicas runs n replicas (r0, r1, ...) on a new Redis whose Go
// handler "report" counts its runs, and opens a Cluster on them.
func countingReplicas(t *testing.T, n int) (*baton.Cluster, *runCounter) {
	t.Helper()
	return countingReplicasOn(t, redistest.New(t), n)
}

// countingReplicasOn is countingReplicas on srv.
func countingReplicasOn(t *testing.T, srv *redistest.Server, n int) (*baton.Cluster, *runCounter) {
	t.Helper()
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	for i := range n {
		running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("r%d", i)))
	}
	return c, counter
}

func TestRuntimeScheduleRunsOncePerTickOnEveryReplicaSet(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	c, counter := countingReplicas(t, 3)
	ctx := context.Background()
	s, err := c.PutSchedule(ctx, "report/tenant-42", baton.ScheduleSpec{
		Schedule: "@every 1s", Handler: "report", Payload: json.RawMessage(`{"tenant":42}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Job != "@report/tenant-42" || s.Version < 1 {
		t.Fatalf("put returned %+v", s)
	}
	poll.Require(t, 20*time.Second, "three ticks of the runtime schedule run", func() bool {
		n, _ := counter.ticks("@report/tenant-42")
		return n >= 3
	})
	if err := c.DeleteSchedule(ctx, "report/tenant-42", false); err != nil {
		t.Fatal(err)
	}
	n, most := counter.ticks("@report/tenant-42")
	if most != 1 {
		t.Fatalf("a tick ran %d times", most)
	}
	counter.mu.Lock()
	payload := counter.payloads["@report/tenant-42"]
	counter.mu.Unlock()
	if payload != `{"tenant":42}` {
		t.Fatalf("payload %q", payload)
	}
	// after the delete has reached the replicas no tick runs: wait for
	// two more seconds' worth of ticks to have had their chance
	time.Sleep(3 * time.Second) // real time: ticks that must not come
	if m, _ := counter.ticks("@report/tenant-42"); m > n+1 {
		t.Fatalf("%d ticks ran after the delete (had %d)", m-n, n)
	}
	if _, err := c.GetSchedule(ctx, "report/tenant-42", 0); !errors.Is(err, baton.ErrNoSchedule) {
		t.Fatalf("get after delete: %v", err)
	}
}

func TestRuntimeSchedulePutRefusesWhatTheJobListRefuses(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, `schedules: {http_prefixes: ["https://hooks.example/tenants/"]}`))
	ctx := context.Background()
	for _, tc := range []struct {
		id, doc, want string
	}{
		{"a", `{schedule: "61 * * * *", handler: {name: report}}`, `job "@a": schedule:`},
		{"a", `{schedule: "@hourly", exec: {command: [rm, -rf, /]}}`, "commands come only from the config file"},
		{"a", `{schedule: "@hourly", http: {url: "https://evil.example/tenants/1"}}`, "under none of schedules.http_prefixes"},
		{"a", `{schedule: "@hourly", http: {url: "https://hooks.example/tenants/../admin"}}`, `".." segment`},
		{"a", `{schedule: "@hourly", handler: {name: report}, name: x}`, "its id names it"},
		{"a", `{schedule: "@hourly", handler: {name: report}, mode: local}`, "mode cron"},
		{"a", `{schedule: "@hourly", handler: {name: report}, shedule: x}`, "shedule"},
		{"a:b", `{schedule: "@hourly", handler: {name: report}}`, "invalid schedule id"},
		{"a", `{schedule: "@hourly", handler: {name: report}, timezone: "${HOME}"}`, "${HOME}"},
	} {
		_, err := c.PutScheduleDocument(ctx, tc.id, []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put %s %s: got %v, want an error with %q", tc.id, tc.doc, err, tc.want)
		}
	}
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{})
	if err != nil || len(page.Schedules) != 0 {
		t.Fatalf("after refused puts: %v %+v", err, page)
	}
	if _, err := c.PutScheduleDocument(ctx, "ok", []byte(`{schedule: "@hourly", http: {url: "https://hooks.example/tenants/7/report"}}`)); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeSchedulesListInPages(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, ""))
	ctx := context.Background()
	for i := range 25 {
		if _, err := c.PutSchedule(ctx, fmt.Sprintf("report/tenant-%02d", i), baton.ScheduleSpec{Schedule: "0 9 * * 1", Timezone: "Europe/Berlin", Handler: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutSchedule(ctx, "other", baton.ScheduleSpec{Schedule: "@daily", Handler: "x"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	q := baton.ScheduleQuery{Prefix: "report/", Limit: 10, Next: 2}
	for range 5 {
		page, err := c.ListSchedules(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Schedules {
			got = append(got, s.ID)
			if len(s.Next) != 2 || s.Next[0].In(time.UTC).Weekday() != time.Monday {
				t.Fatalf("%s: next ticks %v", s.ID, s.Next)
			}
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	if len(got) != 25 || got[0] != "report/tenant-00" || got[24] != "report/tenant-24" {
		t.Fatalf("listed %v", got)
	}
}

// blockingHandler is a Go handler whose runs block until their context
// ends or release is closed; each run's start is sent on started and its
// end (nil, or its context's cause) on ended.
type blockingHandler struct {
	started chan jobs.Run
	ended   chan error
	release chan struct{}
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{started: make(chan jobs.Run, 16), ended: make(chan error, 16), release: make(chan struct{})}
}

func (h *blockingHandler) handle(ctx context.Context, run jobs.Run) error {
	h.started <- run
	select {
	case <-ctx.Done():
		h.ended <- context.Cause(ctx)
		return context.Cause(ctx)
	case <-h.release:
		h.ended <- nil
		return nil
	}
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// historyRecord waits until job's history in namespace rt has a record of
// tick that ended, and returns it.
func historyRecord(t *testing.T, srv *redistest.Server, job string, tick time.Time) jobs.RunRecord {
	t.Helper()
	rdb := srv.Client()
	defer rdb.Close()
	var rec jobs.RunRecord
	poll.Require(t, 10*time.Second, "the run's end in the history", func() bool {
		recs, err := history.Read(context.Background(), rdb, "rt", job, 0)
		for _, r := range recs {
			if err == nil && r.Tick.Equal(tick) && !r.Ended.IsZero() {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// deletedWhileRunning runs schedule "report/x" (@every 1s, a handler that
// blocks) on two replicas and deletes it, with stopRunning or not, while
// its first run is under way; it returns that run.
func deletedWhileRunning(t *testing.T, stopRunning bool) (*redistest.Server, *blockingHandler, jobs.Run) {
	t.Helper()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	ctx := context.Background()
	h := newBlockingHandler()
	reg := jobs.NewRegistry()
	reg.HandleFunc("report", h.handle)
	for i := range 2 {
		running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("r%d", i)))
	}
	if _, err := c.PutSchedule(ctx, "report/x", baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report"}); err != nil {
		t.Fatal(err)
	}
	run := recv(t, h.started, "a run of the schedule")
	if err := c.DeleteSchedule(ctx, "report/x", stopRunning); err != nil {
		t.Fatal(err)
	}
	return srv, h, run
}

// Deleting a runtime schedule with stopRunning stops its run under way on
// whichever replica runs it: the handler's context ends, and the history
// says the run was stopped because its schedule was deleted.
func TestDeleteScheduleWithStopStopsTheRunUnderWay(t *testing.T) {
	t.Parallel()
	srv, h, run := deletedWhileRunning(t, true)
	if cause := recv(t, h.ended, "the run's end"); cause == nil || !strings.Contains(cause.Error(), "its runtime schedule was deleted") {
		t.Fatalf("the run ended with %v, want stopped because its schedule was deleted", cause)
	}
	rec := historyRecord(t, srv, "@report/x", run.Tick)
	if rec.Status != jobs.StatusStopped || !strings.Contains(rec.Reason, "its runtime schedule was deleted") || rec.Worker != run.Replica {
		t.Fatalf("history record %+v", rec)
	}
}

// Deleting a runtime schedule without stopRunning lets its run under way
// finish: it ends ok after every replica has followed the delete.
func TestDeleteScheduleWithoutStopLetsTheRunFinish(t *testing.T) {
	t.Parallel()
	srv, h, run := deletedWhileRunning(t, false)
	// replicas follow a delete within a second: the run must outlive that
	time.Sleep(1500 * time.Millisecond) // real time: a stop that must not come
	select {
	case cause := <-h.ended:
		t.Fatalf("the run ended before it was released: %v", cause)
	default:
	}
	close(h.release)
	if err := recv(t, h.ended, "the run's end"); err != nil {
		t.Fatalf("the run ended with %v", err)
	}
	if rec := historyRecord(t, srv, "@report/x", run.Tick); rec.Status != jobs.StatusOK {
		t.Fatalf("history record %+v", rec)
	}
}

// Deleting a runtime schedule forgets what it keeps on the lock masters:
// its mark (the latest tick decided) and the fencing counters of its
// dispatch and of its runs' lock (the execution lease, or an allow job's
// fence lock). A mark has no expiry and runtime schedules come and go (one
// per customer): a deleted schedule's would stay on every master for good,
// its counters, on a quorum, for a day.
func TestDeleteScheduleForgetsItsMarkAndFences(t *testing.T) {
	t.Parallel()
	srvs := redistest.NewN(t, 4)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking:
  fresh_deployment: true
  masters: ["redis://%s/0", "redis://%s/0", "redis://%s/0"]
namespace: rt
jobs: []
`, srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr(), srvs[3].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r0"))
	ctx := context.Background()
	for id, conc := range map[string]config.Concurrency{"report/gone": config.ConcurrencyForbid, "report/gone-allow": config.ConcurrencyAllow} {
		if _, err := c.PutSchedule(ctx, id, baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report", Concurrency: conc}); err != nil {
			t.Fatal(err)
		}
	}
	mark := []string{"rt:{@report/gone}:mark", "rt:{@report/gone-allow}:mark"}
	counters := []string{"rt:{@report/gone}:fence", "rt:{@report/gone-allow}:fence",
		"rt:lock:{exec:@report/gone}:fence", "rt:lock:{fence:@report/gone-allow}:fence"}
	var masters []*redis.Client
	for _, s := range srvs[1:] {
		masters = append(masters, s.TestClient(t))
	}
	poll.Require(t, 20*time.Second, "a run of each schedule (its mark and counters on every master)", func() bool {
		for _, m := range masters {
			if n, _ := m.Exists(ctx, append(mark, counters...)...).Result(); n != 6 {
				return false
			}
		}
		return true
	})
	for _, id := range []string{"report/gone", "report/gone-allow"} {
		if err := c.DeleteSchedule(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	// a tick decided while the replica had not yet followed the delete
	// writes them again: the replica forgets them once it has followed
	poll.Require(t, 10*time.Second, "the deleted schedules' marks and counters gone", func() bool {
		for _, m := range masters {
			if n, _ := m.Exists(ctx, append(mark, counters...)...).Result(); n != 0 {
				return false
			}
		}
		return true
	})
}

// A schedule deleted and put again under the same id is a new schedule:
// the runs of the old one do not count against the new one's max_runs.
func TestScheduleRecreatedUnderItsIDRunsItsMaxRunsAgain(t *testing.T) {
	t.Parallel()
	c, counter := countingReplicas(t, 1)
	ctx := context.Background()
	spec := baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report", MaxRuns: 1}
	if _, err := c.PutSchedule(ctx, "report/once", spec); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the first schedule's one run", func() bool {
		n, _ := counter.ticks("@report/once")
		return n == 1
	})
	if err := c.DeleteSchedule(ctx, "report/once", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSchedule(ctx, "report/once", spec); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the new schedule's one run", func() bool {
		n, _ := counter.ticks("@report/once")
		return n == 2
	})
}

// A paused schedule deleted and put again under its id is a new schedule,
// not paused: the pause went with the deleted one.
func TestScheduleRecreatedUnderItsIDIsNotPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	ctx := context.Background()
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	spec := baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report"}
	if _, err := c.PutSchedule(ctx, "report/p", spec); err != nil {
		t.Fatal(err)
	}
	if res, err := c.PauseSchedule(ctx, "report/p", baton.PauseNote{By: "ops", Note: "tenant on hold"}); err != nil || !res.InEffect {
		t.Fatalf("pause: %+v %v", res, err)
	}
	if err := c.DeleteSchedule(ctx, "report/p", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSchedule(ctx, "report/p", spec); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r0"))
	poll.Require(t, 20*time.Second, "a run of the schedule put again", func() bool {
		n, _ := counter.ticks("@report/p")
		return n >= 1
	})
}

// A put that no live replica can run (a mistyped handler) is refused,
// saying which handler was meant, and nothing is stored; put ahead of a
// deploy it is stored and shown waiting, and each of its ticks, refused
// by the workers, counts it as failing: in the status (with why), in the
// listing, and in the refused runs' metric.
func TestScheduleNoLiveReplicaCanRunIsRefusedOrShownWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	web := serving(t, handlerReplica(t, c, cfg, "r1", "tenant-report"))
	ctx := context.Background()

	typo := baton.ScheduleSpec{Schedule: "@every 1s", Handler: "tenant-reprot"}
	_, err := c.PutSchedule(ctx, "report/tenant-44", typo)
	if !errors.Is(err, baton.ErrNoRunner) || !strings.Contains(err.Error(), `no live replica registers Go handler "tenant-reprot" (did you mean "tenant-report"?)`) {
		t.Fatalf("put of a mistyped handler: %v, want ErrNoRunner naming the handler meant", err)
	}
	if _, err := c.GetSchedule(ctx, "report/tenant-44", 0); !errors.Is(err, baton.ErrNoSchedule) {
		t.Fatalf("a refused put stored the schedule: %v", err)
	}
	if s, err := c.PutSchedule(ctx, "report/tenant-43", baton.ScheduleSpec{Schedule: "@hourly", Handler: "tenant-report"}); err != nil || s.Waiting != "" {
		t.Fatalf("put of a registered handler: %+v %v", s, err)
	}

	s, err := c.PutSchedule(ctx, "report/tenant-44", typo, baton.AheadOfDeploy())
	if err != nil || !strings.Contains(s.Waiting, `Go handler "tenant-reprot"`) {
		t.Fatalf("put ahead of a deploy: %+v %v, want it stored and waiting", s, err)
	}
	poll.Require(t, 20*time.Second, "the status to count its refused ticks as failing", func() bool {
		st, err := c.Status(ctx)
		if err != nil || st.Schedules == nil || st.Schedules.Failing != 1 || len(st.Schedules.FailingFirst) != 1 {
			return false
		}
		p := st.Schedules.FailingFirst[0]
		return p.ID == "report/tenant-44" && strings.Contains(p.Why, "ticks refused in a row") && strings.Contains(p.Why, "tenant-reprot")
	})
	got, err := c.GetSchedule(ctx, "report/tenant-44", 0)
	if err != nil || got.FailingSince == nil || got.Waiting == "" {
		t.Fatalf("get: %+v %v, want it failing and waiting", got, err)
	}
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: "report/"})
	if err != nil || len(page.Schedules) != 2 || page.Schedules[0].FailingSince != nil || page.Schedules[0].Waiting != "" ||
		page.Schedules[1].FailingSince == nil || page.Schedules[1].Waiting == "" {
		t.Fatalf("listing: %+v %v, want tenant-43 fine and tenant-44 failing and waiting", page, err)
	}
	if m := scrape(t, web.URL); m[`baton_worker_runs_total{job="@",replica="r1",status="refused"}`] < 1 {
		t.Errorf("no refused run in the metrics: %v", m)
	}
}

// A queue Redis that lost the runtime schedules (restarted without
// persistence: flushed here) gets them back from the replicas that had
// read them, loudly: the status reports it, with what was put back, and
// the metric counts it.
func TestScheduleStoreThatWentBackIsPutBackAndReported(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	r := handlerReplica(t, c, cfg, "r1", "report")
	web := serving(t, r)
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.PutSchedule(ctx, fmt.Sprintf("report/tenant-%d", i), baton.ScheduleSpec{Schedule: "@hourly", Handler: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Require(t, 20*time.Second, "the replica to hold the three", func() bool { return r.Schedules() == 3 })
	if err := srv.TestClient(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the three put back and the incident in the status", func() bool {
		st, err := c.Status(ctx)
		return err == nil && st.Schedules != nil && st.Schedules.Count == 3 && st.Schedules.WentBack != nil
	})
	st, _ := c.Status(ctx)
	if b := st.Schedules.WentBack; b.Replica != "r1" || b.PutBack != 3 || b.Now != 0 || b.Had < 3 {
		t.Errorf("the status reports %+v, want r1 putting back 3 from version %d", b, b.Had)
	}
	if r.Schedules() != 3 {
		t.Errorf("the replica holds %d schedules after the restore, want 3", r.Schedules())
	}
	if m := scrape(t, web.URL); m[`baton_schedules_store_went_back_total{replica="r1"}`] != 1 {
		t.Errorf("baton_schedules_store_went_back_total = %v, want 1", m[`baton_schedules_store_went_back_total{replica="r1"}`])
	}
}

// A listing asked for runs gives each schedule its newest runs, failure
// streak and last success, as the schedules page shows them; a get always
// does.
func TestScheduleListingGivesRecentRunsAndStreak(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil }))
	reg.Register("broken", jobs.HandlerFunc(func(context.Context, jobs.Run) error { return errors.New("tenant db gone") }))
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r1"))
	ctx := context.Background()
	zero := 0
	for id, h := range map[string]string{"t/ok": "report", "t/broken": "broken"} {
		if _, err := c.PutSchedule(ctx, id, baton.ScheduleSpec{Schedule: "@every 1s", Handler: h, MaxRetry: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	var page baton.SchedulePage
	poll.Require(t, 20*time.Second, "two runs of each", func() bool {
		var err error
		page, err = c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: "t/", Runs: true})
		return err == nil && len(page.Schedules) == 2 && len(page.Schedules[0].Recent) >= 2 && page.Schedules[0].FailureStreak >= 2 &&
			len(page.Schedules[1].Recent) >= 2 && page.Schedules[1].LastSuccess != nil
	})
	if b := page.Schedules[0]; b.ID != "t/broken" || b.LastSuccess != nil || b.Recent[0].Status != jobs.StatusFailed {
		t.Errorf("t/broken: %+v", b)
	}
	if bare, err := c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: "t/"}); err != nil || bare.Schedules[0].Recent != nil {
		t.Errorf("a listing not asked for runs: %+v %v", bare, err)
	}
	if s, err := c.GetSchedule(ctx, "t/ok", 0); err != nil || s.LastSuccess == nil || s.FailureStreak != 0 {
		t.Errorf("get: %+v %v", s, err)
	}
}

// afterScheduleDelete runs then, once, right after the first delete of a
// runtime schedule (delete.lua: six keys, the shard's restores last) that
// deleted one.
type afterScheduleDelete struct {
	once sync.Once
	then func()
}

func (h *afterScheduleDelete) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterScheduleDelete) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if n := cmd.Name(); err == nil && (n == "evalsha" || n == "eval") && len(args) > 8 && fmt.Sprint(args[2]) == "6" &&
			strings.HasSuffix(fmt.Sprint(args[8]), "restored") {
			if res, ok := cmd.(*redis.Cmd); ok {
				if v, _ := res.Int64Slice(); len(v) == 2 && v[0] > 0 {
					h.once.Do(h.then)
				}
			}
		}
		return err
	}
}

func (h *afterScheduleDelete) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A conditional delete takes only the schedule it was read from, and what
// it does after (its pause and run count go with it) touches nothing of a
// schedule put again under the id once it was deleted: another caller
// that puts it again and pauses it right after the delete finds it
// paused.
func TestConditionalDeleteLeavesThePauseOfTheScheduleThatFollowsIt(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	deleter, other := openCluster(t, cfg), openCluster(t, cfg)
	ctx := context.Background()
	spec := baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report"}
	s, err := deleter.PutSchedule(ctx, "report/p", spec)
	if err != nil {
		t.Fatal(err)
	}
	baton.HookCluster(deleter, &afterScheduleDelete{then: func() {
		if _, err := other.PutSchedule(ctx, "report/p", spec); err != nil {
			t.Error(err)
		}
		if res, err := other.PauseSchedule(ctx, "report/p", baton.PauseNote{By: "ops", Note: "the new one waits"}); err != nil || !res.InEffect {
			t.Errorf("pause the schedule put again: %+v %v", res, err)
		}
	}})
	if err := deleter.DeleteScheduleIfMatch(ctx, "report/p", s.ETag(), false); err != nil {
		t.Fatal(err)
	}
	got, err := other.GetSchedule(ctx, "report/p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Paused == nil || got.Created.Equal(s.Created) {
		t.Fatalf("the schedule put again and paused after the delete (created %v, the deleted one %v): paused %+v, want its pause kept", got.Created, s.Created, got.Paused)
	}
}

// A runtime schedule's H is picked from its job name, "@ID", as a job
// list's is from the job's: its next ticks are those of the spec with H
// resolved, and a wrong H is refused with the field named.
func TestRuntimeScheduleHPicksAValueFromItsID(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, ""))
	ctx := context.Background()
	if _, err := c.PutSchedule(ctx, "report/tenant-42", baton.ScheduleSpec{Schedule: "H H * * *", Handler: "report"}); err != nil {
		t.Fatal(err)
	}
	s, err := c.GetSchedule(ctx, "report/tenant-42", 3)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := schedule.Hashed("H H * * *", "@report/tenant-42")
	if err != nil {
		t.Fatal(err)
	}
	want, err := schedule.Parse(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Next) != 3 {
		t.Fatalf("next ticks %v, want 3", s.Next)
	}
	for i, at := range s.Next {
		if w := want.Next(at.Add(-time.Second)); !w.Equal(at) {
			t.Errorf("tick %d at %s is not a tick of %q (%s is)", i, at, spec, w)
		}
	}
	_, err = c.PutSchedule(ctx, "report/bad", baton.ScheduleSpec{Schedule: "H/0 * * * *", Handler: "report"})
	if err == nil || !strings.Contains(err.Error(), `minute field "H/0"`) {
		t.Errorf("a wrong H = %v, want the field named", err)
	}
}

// A runtime schedule takes a DST policy as a job of the list does; a
// policy baton does not know is refused with the key named.
func TestRuntimeScheduleDSTPolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, ""))
	ctx := context.Background()
	s, err := c.PutSchedule(ctx, "report/dst", baton.ScheduleSpec{Schedule: "30 * * * *", Timezone: "Europe/Berlin", DST: schedule.DSTSkip, Handler: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.Definition), `"dst":"skip"`) {
		t.Errorf("definition %s holds no dst", s.Definition)
	}
	_, err = c.PutSchedule(ctx, "report/bad-dst", baton.ScheduleSpec{Schedule: "30 * * * *", DST: "twice", Handler: "report"})
	if err == nil || !strings.Contains(err.Error(), `dst: unknown policy "twice"`) {
		t.Errorf("dst twice = %v, want it refused naming dst", err)
	}
}

// A runtime schedule paused until an instant is counted paused by the
// status while the pause lasts, and no more once it has ended by itself
// (its flags expired on the lock masters, without a resume).
func TestRuntimeSchedulePauseWithAnEndLeavesTheStatusCountWhenItEnds(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, ""))
	ctx := context.Background()
	if _, err := c.PutSchedule(ctx, "report/a", baton.ScheduleSpec{Schedule: "0 9 * * *", Handler: "report"}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(1500 * time.Millisecond)
	if res, err := c.PauseSchedule(ctx, "report/a", baton.PauseNote{By: "ops", Until: end}); err != nil || !res.InEffect {
		t.Fatalf("pause until %s: %+v %v", end, res, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Schedules == nil || st.Schedules.Paused != 1 {
		t.Fatalf("while paused: %+v %v, want 1 paused", st.Schedules, err)
	}
	poll.Require(t, 10*time.Second, "the pause's flags expire", func() bool {
		s, err := c.GetSchedule(ctx, "report/a", 0)
		return err == nil && s.Paused == nil
	})
	st, err = c.Status(ctx)
	if err != nil || st.Schedules.Paused != 0 || len(st.Schedules.PausedFirst) != 0 {
		t.Errorf("after the pause ended by itself, the status counts %d paused %v (%v), want none", st.Schedules.Paused, st.Schedules.PausedFirst, err)
	}
}

// A runtime schedule deleted and put again under its id is a new one: the
// ticks skipped of the one deleted (baton skip) do not keep the new one
// from running, as its pause does not (DeleteSchedule).
func TestRuntimeSchedulePutAgainRunsTheTicksSkippedOfTheOneDeleted(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report"}
	if _, err := c.PutSchedule(ctx, "report/a", spec); err != nil {
		t.Fatal(err)
	}
	first := time.Now().Add(5 * time.Second).Truncate(time.Second)
	ticks := []time.Time{first, first.Add(time.Second), first.Add(2 * time.Second)}
	res, err := c.Skip(ctx, "@report/a", baton.SkipRequest{By: "alice", Note: "tenant 1 maintenance", Ticks: ticks})
	if err != nil || len(res.Skipped) != 3 {
		t.Fatalf("skip: %+v %v", res, err)
	}
	if err := c.DeleteSchedule(ctx, "report/a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSchedule(ctx, "report/a", spec); err != nil {
		t.Fatal(err)
	}
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r0"))
	after := first.Add(4 * time.Second)
	poll.Require(t, 30*time.Second, "a tick after the skipped ones runs", func() bool {
		counter.mu.Lock()
		defer counter.mu.Unlock()
		return counter.byTick["@report/a "+after.UTC().Format(time.RFC3339)] > 0
	})
	counter.mu.Lock()
	defer counter.mu.Unlock()
	for _, tk := range ticks {
		if counter.byTick["@report/a "+tk.UTC().Format(time.RFC3339)] != 1 {
			t.Errorf("tick %s of the schedule put again did not run: the skip of the one deleted holds it", tk.UTC().Format(time.RFC3339))
		}
	}
}
