package baton_test

// Adversarial review of the operating features (history, Cluster, HTTP API,
// backfill, trigger). Each test names the schedule it plays.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// reviewHistory appends events to a job's history with the worker's own
// script (jobs/lua/history_add.lua) and field layout, so trimming behaves as
// in production.
type reviewHistory struct {
	rdb    *redis.Client
	key    string
	keep   int   // history.runs * 3
	maxAge int64 // ms
	script *redis.Script
}

func newReviewHistory(t *testing.T, rdb *redis.Client, ns, job string, runs int) *reviewHistory {
	t.Helper()
	src, err := os.ReadFile("jobs/lua/history_add.lua")
	if err != nil {
		t.Fatal(err)
	}
	return &reviewHistory{rdb: rdb, key: ns + ":{history:" + job + "}", keep: runs * 3,
		maxAge: (7 * 24 * time.Hour).Milliseconds(), script: redis.NewScript(string(src))}
}

func (h *reviewHistory) add(t *testing.T, fields ...any) {
	t.Helper()
	args := append([]any{h.keep, h.maxAge}, fields...)
	if err := h.script.Run(context.Background(), h.rdb, []string{h.key}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// ran writes what a worker writes for one successful run of tick at.
func (h *reviewHistory) ran(t *testing.T, at time.Time, run string) {
	tick := at.UTC().Format(time.RFC3339Nano)
	h.add(t, "ev", "started", "tick", tick, "run", run, "replica", "w1", "attempt", 1, "fence", 7, "by", "s1")
	h.add(t, "ev", "finished", "tick", tick, "run", run, "replica", "w1", "attempt", 1, "status", "ok", "fence", 7, "exit_code", 0)
}

// paused writes what the scheduler writes for a paused tick.
func (h *reviewHistory) paused(t *testing.T, at time.Time) {
	h.add(t, "ev", "not_run", "tick", at.UTC().Format(time.RFC3339Nano), "run", "", "status", "paused", "reason", "the job is paused")
}

func reviewConfig(t *testing.T, addr, ns string, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
%s
jobs:
  - name: b
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`, addr, ns, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func pendingTasks(t *testing.T, rdb *redis.Client, queue string) []string {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	ts, err := insp.ListPendingTasks(queue, asynq.PageSize(1000))
	if err != nil && !strings.Contains(err.Error(), "does not exist") && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	var ids []string
	for _, ti := range ts {
		ids = append(ids, ti.ID)
	}
	return ids
}

// G1, schedule: a job ran ticks N (4-2h ago, history has them); then a
// backfill of a long paused window P (10h ago) wrote ~500 history events
// of OLD ticks; history.runs (100 -> ~300 entries) trimmed the N events
// away. HistoryCoverage takes the oldest remaining entry's *tick* (an old
// P tick) as the coverage start, so a later backfill over the N window is
// allowed, finds "no run" for every N tick (records and asynq IDs expired
// long ago) and dispatches ticks that ran.
func TestBackfillTrustsHistoryTrimmedOutOfOrder(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := reviewConfig(t, srv.Addr(), "rvtrim", "")
	h := newReviewHistory(t, rdb, "rvtrim", "b", cfg.History.Runs)
	now := time.Now().UTC().Truncate(time.Minute)
	pTick := func(i int) time.Time { return now.Add(-10 * time.Hour).Add(time.Duration(i) * time.Minute) }
	nTick := func(i int) time.Time { return now.Add(-4 * time.Hour).Add(time.Duration(i) * time.Minute) }
	for i := range 250 { // 10h ago: paused
		h.paused(t, pTick(i))
	}
	for i := range 120 { // 4h..2h ago: ran
		h.ran(t, nTick(i), fmt.Sprintf("n%03d", i))
	}
	for i := range 250 { // now: the backfill of the paused window ran
		h.ran(t, pTick(i), fmt.Sprintf("p%03d", i))
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plan, err := c.Backfill(ctx, "b", nTick(0), nTick(119), true)
	if err != nil {
		t.Logf("dry run refused (the safe answer): %v", err)
		return
	}
	if len(plan.Ticks) != 0 {
		t.Errorf("dry run over ticks that all ran: %d listed as never ran, %d ran (window accepted although their history was trimmed)", len(plan.Ticks), plan.Ran)
	}
	// and a real backfill of three of them enqueues them again
	plan, err = c.Backfill(ctx, "b", nTick(0), nTick(2), false)
	if err != nil {
		t.Fatal(err)
	}
	if ids := pendingTasks(t, rdb, cfg.QueueName("default")); len(ids) > 0 {
		t.Errorf("ticks that ran were enqueued again: %v (plan: dispatched %v)", ids, plan.Dispatched)
	}
}

// G1, schedule: history.runs was 100 while 200 ticks ran (the stream was
// trimmed to ~300 entries); the operator raises history.runs to 1000.
// HistoryCoverage decides "never trimmed by count" from the current
// setting (XLEN < 3000) and vouches for the whole max_age: the trimmed
// ticks are listed as never ran.
func TestBackfillAfterHistoryRunsRaised(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	old := reviewConfig(t, srv.Addr(), "rvraise", "")
	h := newReviewHistory(t, rdb, "rvraise", "b", old.History.Runs)
	now := time.Now().UTC().Truncate(time.Minute)
	tick := func(i int) time.Time { return now.Add(-5 * time.Hour).Add(time.Duration(i) * time.Minute) }
	for i := range 200 {
		h.ran(t, tick(i), fmt.Sprintf("r%03d", i))
	}
	t.Logf("stream length after trimming: %d", rdb.XLen(context.Background(), "rvraise:{history:b}").Val())
	cfg := reviewConfig(t, srv.Addr(), "rvraise", "history: {runs: 1000}")
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plan, err := c.Backfill(ctx, "b", tick(0), tick(199), true)
	if err != nil {
		t.Logf("refused (the safe answer): %v", err)
		return
	}
	if len(plan.Ticks) != 0 {
		t.Errorf("all 200 ticks ran; the dry run lists %d as never ran (first %s), ran %d", len(plan.Ticks), plan.Ticks[0].Format(time.RFC3339), plan.Ran)
	}
}

// Token, schedule: an operator opened /queues/ in a browser (HTTP Basic
// with the token as password; the browser caches and re-sends it). Any web
// page can then submit a plain HTML form (no custom header, empty body,
// form content type) to the API: authorized() accepts Basic for /api/ too,
// readBody accepts an empty body, no Content-Type or Origin check: CSRF.
// The dashboard itself sends a bearer token, so /api/ does not need Basic.
func TestBasicAuthMakesAPICSRFable(t *testing.T) {
	srv := redistest.New(t)
	web := apiServer(t, srv, apiToken)
	rdb := srv.TestClient(t)
	for _, path := range []string{"/api/jobs/report/pause", "/api/jobs/report/trigger", "/queues/api/queues/api:default:pause"} {
		req, _ := http.NewRequest("POST", web.URL+path, strings.NewReader(""))
		req.SetBasicAuth("", apiToken)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 {
			t.Errorf("cross-site form POST %s with cached Basic credentials: %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
	if rdb.Exists(context.Background(), "api:{report}:paused").Val() == 1 || len(rdb.Keys(context.Background(), "api:*paused*").Val()) > 0 {
		t.Logf("pause flag keys now: %v", rdb.Keys(context.Background(), "api:*paused*").Val())
	}
}

// Trust, schedule: two deployments share one Redis (namespaces "api" and
// "other"). /queues/ (asynqmon) of "api", opened with api's token, lists
// and can delete the tasks of "other": asynqmon is not namespaced.
func TestQueuesSeeOtherNamespaces(t *testing.T) {
	srv := redistest.New(t)
	web := apiServer(t, srv, apiToken)
	rdb := srv.TestClient(t)
	other := reviewConfig(t, srv.Addr(), "other", "")
	c, err := baton.NewCluster(other)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tk, err := c.Trigger(context.Background(), "b", "review")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", web.URL+"/queues/api/queues", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// the view shows every namespace's queues (asynqmon reads the whole
	// Redis; documented), but changes nothing: it is read-only
	resp.Body.Close()
	req, _ = http.NewRequest("DELETE", web.URL+"/queues/api/queues/other:default/pending_tasks/"+tk.ID(), nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(pendingTasks(t, rdb, "other:default")) == 0 {
		t.Errorf("namespace api's token deleted namespace other's pending tick %s (DELETE answered %d)", tk.ID(), resp.StatusCode)
	}
}

// G5/G7: API inputs that must be refused cleanly (these are expected to pass).
func TestAPIInputs(t *testing.T) {
	srv := redistest.New(t)
	web := apiServer(t, srv, apiToken)
	do := func(method, path string, auth func(*http.Request), body string) (int, string) {
		req, _ := http.NewRequest(method, web.URL+path, strings.NewReader(body))
		if auth != nil {
			auth(req)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	emptyBasic := func(r *http.Request) { r.SetBasicAuth("x", "") }
	emptyBearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }
	userIsToken := func(r *http.Request) { r.SetBasicAuth(apiToken, "") }
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+apiToken) }
	lower := func(r *http.Request) { r.Header.Set("Authorization", "bearer "+apiToken) }
	for _, tc := range []struct {
		method, path string
		auth         func(*http.Request)
		body         string
		ok           func(int) bool
		what         string
	}{
		{"POST", "/api/jobs/report/pause", emptyBasic, "", func(c int) bool { return c == 401 }, "Basic, empty password"},
		{"POST", "/api/jobs/report/pause", emptyBearer, "", func(c int) bool { return c == 401 }, "empty bearer"},
		{"POST", "/api/jobs/report/pause", userIsToken, "", func(c int) bool { return c == 401 }, "token as Basic user"},
		{"GET", "/queues/api/queues", emptyBasic, "", func(c int) bool { return c == 401 }, "queues, Basic empty password"},
		{"GET", "/queues/../api/status", nil, "", func(c int) bool { return c != 200 || true }, "dot-dot (mux cleans; read call anyway)"},
		{"POST", "/queues/../api/jobs/report/pause", nil, "", func(c int) bool { return c == 401 || c == 301 || c == 307 || c == 308 || c == 404 }, "dot-dot to a mutating call"},
		{"POST", "/api/jobs/report/../report/pause", nil, "", func(c int) bool { return c != 200 }, "dot-dot inside api"},
		{"GET", "/queues%2f..%2fapi/status", nil, "", func(c int) bool { return c != 200 || true }, "encoded slashes"},
		{"POST", "/api/jobs/report/backfill", bearer, `{"from":"0001-01-01T00:00:01Z","to":"2026-01-01T00:00:00Z"}`, func(c int) bool { return c == 400 }, "backfill from year 1"},
		{"POST", "/api/jobs/report/backfill", bearer, `{"from":"1969-12-31T23:00:00Z","to":"1970-01-01T01:00:00Z"}`, func(c int) bool { return c == 400 }, "backfill around the epoch"},
		{"POST", "/api/jobs/report/backfill", bearer, `{"from":"2026-01-01T00:00:00Z","to":"9999-12-31T23:59:59Z"}`, func(c int) bool { return c == 400 }, "backfill to year 9999"},
		{"POST", "/api/jobs/report/backfill", bearer, `{"from":null,"to":null}`, func(c int) bool { return c == 400 }, "null times"},
		{"POST", "/api/jobs/report/backfill", bearer, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T01:00:00Z"}{"x":1}`, func(c int) bool { return c == 400 }, "two JSON values"},
		{"POST", "/api/jobs/report/trigger", bearer, `{"by":"a\u0000b\u001b[31m"}`, func(c int) bool { return c == 400 || c == 200 }, "control characters in by (accepted; the CLI quotes it)"},
		{"POST", "/api/jobs/report/pause", lower, "", func(c int) bool { return c == 401 || c == 200 }, "lower-case bearer"},
		{"GET", "/api/jobs/report/history?n=99999999999999999999", bearer, "", func(c int) bool { return c == 400 }, "huge n"},
		{"GET", "/api/jobs/report/history?n=0", bearer, "", func(c int) bool { return c == 200 }, "n=0 (all)"},
		{"GET", "/api/jobs/" + strings.Repeat("x", 10000) + "/history", bearer, "", func(c int) bool { return c == 404 || c == 414 || c == 431 }, "long job name"},
		{"GET", "/api/jobs/%2e%2e/history", bearer, "", func(c int) bool { return c == 404 }, "job .."},
	} {
		start := time.Now()
		code, body := do(tc.method, tc.path, tc.auth, tc.body)
		if !tc.ok(code) {
			t.Errorf("%s: %s %s: %d %s", tc.what, tc.method, tc.path[:min(len(tc.path), 80)], code, strings.TrimSpace(body)[:min(200, len(strings.TrimSpace(body)))])
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %s", tc.what, d)
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Status with one of three lock masters blackholed (a partition, not a
// refused connection): the API must still answer within its bound with
// the jobs and a "partial" warning.
func TestStatusWithMasterBlackholed(t *testing.T) {
	servers := redistest.NewN(t, 4)
	proxy := redistest.NewTestProxy(t, servers[3].Addr())
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking:
  fresh_deployment: true
  masters: ["redis://%s/0", "redis://%s/0", "redis://%s/0"]
namespace: rvdown
http: {token: %q}
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
`, servers[0].Addr(), servers[1].Addr(), servers[2].Addr(), proxy.Addr(), apiToken)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := baton.New(cfg, baton.WithReplicaID("s"))
	if err != nil {
		t.Fatal(err)
	}
	h := baton.NewHTTPHandler(r)
	web := httptest.NewServer(h)
	defer func() { web.Close(); h.Close(); r.Close() }()
	if code, body := call(t, web, "GET", "/api/status", apiToken, ""); code != 200 {
		t.Fatalf("healthy: %d %s", code, body)
	}
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/status"} { // /api/locks behaves alike: 200 [] after the full 10s
		start := time.Now()
		code, body := call(t, web, "GET", path, apiToken, "")
		took := time.Since(start)
		var st baton.Status
		_ = json.Unmarshal([]byte(body), &st)
		t.Logf("%s with a master blackholed: %d in %s", path, code, took.Round(time.Millisecond))
		if code != 200 || took > 5*time.Second {
			t.Errorf("%s with one of three masters blackholed: %d after %s", path, code, took.Round(time.Millisecond))
		}
		if path == "/api/status" && code == 200 {
			w := strings.Join(st.Warnings, " | ")
			if strings.Contains(w, "read the history") || strings.Contains(w, "roster") || strings.Contains(w, "master 0 ") || strings.Contains(w, "master 1 ") {
				t.Errorf("status lost what healthy Redis servers hold (queue Redis history and roster, masters 0 and 1) because one master hangs: %s", w)
			}
		}
	}
	start := time.Now()
	code, body := call(t, web, "POST", "/api/jobs/report/pause", apiToken, "")
	if took := time.Since(start); code != 200 || took > 8*time.Second || !strings.Contains(body, `"in_effect": true`) {
		t.Errorf("pause with one of three masters blackholed: %d after %s: %s", code, took.Round(time.Millisecond), body)
	}
}

// reviewCluster starts a 3-master Redis Cluster (slots split in three).
func reviewCluster(t *testing.T) []string {
	t.Helper()
	nodes := redistest.NewN(t, 3, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
	ctx := context.Background()
	var addrs []string
	for i, n := range nodes {
		c := n.TestClient(t)
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(nodes[0].Addr(), ":")
			if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
		addrs = append(addrs, n.Addr())
	}
	c0 := nodes[0].TestClient(t)
	poll.Require(t, 10*time.Second, "cluster state ok", func() bool {
		for _, n := range nodes {
			info, err := n.TestClient(t).ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	_ = c0
	return addrs
}

// Locks on a Redis Cluster (redis.cluster, no locking.masters: the cluster
// is the one lock "master"), schedule: 12 locks held, spread over the
// cluster's slots. locking.Held runs SCAN on the cluster client, which
// go-redis sends to one (random) node: baton locks / GET /api/locks /
// status's Lock column list only the locks on that node.
func TestLocksOnARedisCluster(t *testing.T) {
	addrs := reviewCluster(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {cluster: {addrs: [%q, %q, %q]}}
locking: {fresh_deployment: true}
namespace: rvcl
jobs:
  - name: b
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, addrs[0], addrs[1], addrs[2])))
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	locks, err := locking.New(cc, locking.WithPrefix("rvcl:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var leases []*locking.Lease
	for i := range 12 {
		l, err := locks.TryLock(ctx, fmt.Sprintf("job-%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	defer func() {
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	}()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		held, err := c.Locks(ctx)
		if len(held) != 12 {
			t.Errorf("12 locks held on the cluster, Cluster.Locks lists %d (%v)", len(held), err)
		}
	}
}

// Locks listing, schedule: `baton lock` names with glob characters and
// braces; and another namespace's lock. Each is listed once, under its own
// name, in its own namespace only (expected to pass).
func TestLocksWithGlobNames(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := reviewConfig(t, srv.Addr(), "rvglob", "")
	mk := func(prefix string) *locking.Client {
		l, err := locking.New(rdb, locking.WithPrefix(prefix), locking.WithFreshDeployment())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	ours, theirs := mk("rvglob:lock:"), mk("rvglob2:lock:")
	ctx := context.Background()
	names := []string{"a*", "b?", "[c]", `d\`, "e}f", "{g}", "h}:fence"}
	for _, n := range names {
		if _, err := ours.TryLock(ctx, n, time.Minute); err != nil {
			t.Fatal(n, err)
		}
	}
	if _, err := theirs.TryLock(ctx, "other-namespace", time.Minute); err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := c.Locks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, h := range held {
		got[h.Name]++
	}
	for _, n := range names {
		if got[n] != 1 {
			t.Errorf("lock %q listed %d times: %v", n, got[n], got)
		}
	}
	if len(got) != len(names) {
		t.Errorf("listed %v, want exactly %q", got, names)
	}
}
