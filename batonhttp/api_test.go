package batonhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/asynqmonui"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
	"github.com/batonhq/baton/scheduler"
)

const apiToken = "api-token-0123456789"

// apiServer serves the HTTP handler of one (not started) replica of a
// config on a real Redis; token is http.token ("" for none).
func apiServer(t testing.TB, srv *redistest.Server, token string) *httptest.Server {
	t.Helper()
	return apiServerHTTP(t, srv, fmt.Sprintf("{token: %q}", token))
}

// apiServerHTTP is apiServer with the config's http section written out
// (a YAML flow mapping).
func apiServerHTTP(t testing.TB, srv *redistest.Server, httpSection string) *httptest.Server {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: api
http: %s
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: tidy
    mode: local
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr(), httpSection)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := baton.New(cfg, baton.WithReplicaID("api-1"))
	if err != nil {
		t.Fatal(err)
	}
	h := batonhttp.NewHandler(r)
	q, err := asynqmonui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ServeQueues(q)
	web := httptest.NewServer(h)
	t.Cleanup(func() {
		web.Close()
		h.Close()
		r.Close()
	})
	return web
}

// call makes one API request and returns the status and the body.
func call(t *testing.T, web *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, web.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(path, "/api/") && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, string(b)
}

// The API reads status, history and locks and pauses, resumes and
// triggers with the bearer token, and every error is JSON naming what is
// wrong, with a status that says whose fault.
func TestAPI(t *testing.T) {
	srv := redistest.New(t)
	web := apiServer(t, srv, apiToken)
	rdb := srv.TestClient(t)

	code, body := call(t, web, "GET", "/api/status", apiToken, "")
	var st baton.Status
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Jobs) != 3 || st.Jobs[0].Name != "report" || st.Jobs[0].Next.IsZero() {
		t.Fatalf("status: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/", "", ""); code != 200 || !strings.Contains(body, "<title>baton</title>") {
		t.Errorf("dashboard: %d", code)
	}
	for _, tc := range []struct {
		method, path, token, body string
		code                      int
		want                      string
	}{
		{"POST", "/api/jobs/report/pause", "", "", 401, "a valid token is required"},
		{"POST", "/api/jobs/report/pause", "wrong-token-0123456789", "", 401, "a valid token is required"},
		{"POST", "/api/jobs/nope/pause", apiToken, "", 404, `no job \"nope\"`},
		{"POST", "/api/jobs/pump/pause", apiToken, "", 409, "singleton"},
		{"POST", "/api/jobs/tidy/trigger", apiToken, "", 409, "local job"},
		{"POST", "/api/jobs/report/trigger", apiToken, `{"by": "x", "extra": 1}`, 400, "unknown field"},
		{"POST", "/api/jobs/report/trigger", apiToken, `{"by": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "over"},
		{"GET", "/api/jobs/report/history?n=abc", apiToken, "", 400, "n must be"},
		{"POST", "/api/jobs/report/backfill", apiToken, `{"from": "2026-01-01T00:00:00Z"}`, 400, "from and to are required"},
		{"POST", "/api/jobs/report/backfill", apiToken, `{"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}`, 400, "before it starts"},
		{"POST", "/api/jobs/tidy/backfill", apiToken, `{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"}`, 409, "local job"},
		{"POST", "/api/jobs/tidy/backfill", apiToken, `{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z", "chain": true}`, 409, "local job"},
		{"POST", "/api/jobs/report/backfill", apiToken, `{"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z", "chain": true}`, 400, "before it starts"},
		{"POST", "/api/jobs/report/backfill", apiToken, `{"from": "2026-01-01T00:00:00.5Z", "to": "2026-01-01T00:00:00.5Z", "dry_run": true, "chain": true}`, 200, `"job": "report"`},
		{"GET", "/api/jobs/nope/history", apiToken, "", 404, "no job"},
		{"GET", "/api/jobs/nope/ticks", apiToken, "", 404, `no job \"nope\"`},
		{"GET", "/api/jobs/pump/ticks", apiToken, "", 409, "singleton"},
		{"GET", "/api/jobs/report/ticks?from=yesterday", apiToken, "", 400, "from must be an RFC 3339 time"},
		{"GET", "/api/jobs/report/ticks?to=2026-13-01T00:00:00Z", apiToken, "", 400, "to must be an RFC 3339 time"},
		{"GET", "/api/jobs/report/ticks?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", apiToken, "", 400, "before it starts"},
		{"GET", "/api/jobs/report/ticks?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", apiToken, "", 400, "more than 10000 ticks"},
		{"GET", "/api/ticks?to=now", apiToken, "", 400, "to must be an RFC 3339 time"},
		{"GET", "/api/nothing", apiToken, "", 404, "no API endpoint"},
		{"DELETE", "/api/jobs/report/pause", apiToken, "", 405, "this endpoint takes POST"},
		{"POST", "/api/jobs/report/pause", apiToken, `{"for": "2h", "until": "2030-01-01T00:00:00Z"}`, 400, `\"for\" and \"until\" exclude each other`},
		{"POST", "/api/jobs/report/pause", apiToken, `{"for": "soon"}`, 400, `\"for\": want a positive duration`},
		{"POST", "/api/jobs/report/pause", apiToken, `{"until": "tomorrow"}`, 400, `\"until\": want an RFC 3339 time`},
		{"POST", "/api/jobs/report/pause", apiToken, `{"until": "2020-01-01T00:00:00Z"}`, 400, "has passed"},
	} {
		code, body := call(t, web, tc.method, tc.path, tc.token, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d and %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
	key := scheduler.PauseKey("api", "report")
	if code, body := call(t, web, "POST", "/api/jobs/report/pause", apiToken, ""); code != 200 || !strings.Contains(body, `"in_effect": true`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	if rdb.Exists(context.Background(), key).Val() != 1 {
		t.Error("pause through the API set no flag in Redis")
	}
	if code, body := call(t, web, "POST", "/api/jobs/report/resume", apiToken, ""); code != 200 || rdb.Exists(context.Background(), key).Val() != 0 {
		t.Errorf("resume: %d %s", code, body)
	}
	// skip the next two ticks, saying why
	if code, body := call(t, web, "POST", "/api/jobs/report/skip", apiToken, `{"next": 2, "note": "freeze", "by": "carol"}`); code != 200 || strings.Count(body, "T") < 2 || !strings.Contains(body, `"skipped": [`) {
		t.Errorf("skip: %d %s", code, body)
	}
	if code, body := call(t, web, "POST", "/api/jobs/report/skip", apiToken, `{"next": 1, "ticks": ["2030-01-01T00:00:00Z"]}`); code != 400 || !strings.Contains(body, "not both") {
		t.Errorf("skip next and ticks: %d %s", code, body)
	}
	// a pause for a while ends by itself: the flag expires then
	if code, body := call(t, web, "POST", "/api/jobs/report/pause", apiToken, `{"note": "freeze", "for": "90m"}`); code != 200 || !strings.Contains(body, `"until": "`) {
		t.Fatalf("pause for 90m: %d %s", code, body)
	}
	if ttl := rdb.PTTL(context.Background(), key).Val(); ttl <= 89*time.Minute || ttl > 90*time.Minute {
		t.Errorf("a pause for 90m left a ttl of %s on the flag", ttl)
	}
	if code, body := call(t, web, "POST", "/api/jobs/report/resume", apiToken, ""); code != 200 {
		t.Errorf("resume: %d %s", code, body)
	}
	code, body = call(t, web, "POST", "/api/jobs/report/trigger", apiToken, `{"by": "alice"}`)
	var trig struct {
		RunID string `json:"run_id"`
		By    string `json:"by"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &trig) != nil || trig.RunID == "" || trig.By != "api:alice" {
		t.Fatalf("trigger: %d %s", code, body)
	}
	code, body = call(t, web, "GET", "/api/jobs/report/history", apiToken, "")
	if code != 200 || !strings.Contains(body, trig.RunID) || !strings.Contains(body, `"manual": true`) {
		t.Errorf("history after the trigger: %d %s", code, body)
	}
	code, body = call(t, web, "GET", "/api/jobs/report/ticks", apiToken, "")
	var ledger baton.TickLedger
	if code != 200 || json.Unmarshal([]byte(body), &ledger) != nil || ledger.Job != "report" || ledger.KnownFrom.IsZero() ||
		!slices.ContainsFunc(ledger.Ticks, func(lt baton.LedgerTick) bool { return lt.Manual && lt.RunID == trig.RunID }) {
		t.Errorf("ticks after the trigger: %d %s", code, body)
	}
	code, body = call(t, web, "GET", "/api/ticks", apiToken, "")
	var all []baton.TickLedger
	if code != 200 || json.Unmarshal([]byte(body), &all) != nil || len(all) != 2 || all[0].Job != "report" || all[1].Job != "tidy" {
		t.Errorf("every job's ticks (report and tidy; the singleton has none): %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/api/locks", apiToken, ""); code != 200 || !strings.HasPrefix(body, "[") {
		t.Errorf("locks: %d %s", code, body)
	}
}

// Without http.token, changes through the API are off.
func TestAPIWithoutToken(t *testing.T) {
	web := apiServer(t, redistest.New(t), "")
	if code, body := call(t, web, "POST", "/api/jobs/report/pause", "anything", ""); code != 403 || !strings.Contains(body, "set http.token") {
		t.Errorf("pause without a configured token: %d %s", code, body)
	}
}

// The queue side (asynqmon) is under /queues/, behind the token: a browser
// sends it as the Basic password, a script as a bearer token.
func TestQueuesBehindToken(t *testing.T) {
	web := apiServer(t, redistest.New(t), apiToken)
	get := func(path string, auth func(*http.Request)) (int, string) {
		req, _ := http.NewRequest("GET", web.URL+path, nil)
		auth(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	none := func(*http.Request) {}
	basic := func(r *http.Request) { r.SetBasicAuth("ops", apiToken) }
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+apiToken) }
	if code, _ := get("/queues/", none); code != 401 {
		t.Errorf("/queues/ without the token: %d", code)
	}
	if code, body := get("/queues/", basic); code != 200 || !strings.Contains(strings.ToLower(body), "<html") {
		t.Errorf("/queues/ with Basic: %d", code)
	}
	if code, body := get("/queues/api/queues", bearer); code != 200 || !strings.Contains(body, "queues") {
		t.Errorf("/queues/api/queues: %d %s", code, body)
	}
}

// /api/status on a brand-new Redis without baton init: the master in its
// restart quarantine, why and until when, named by its index (the status is
// read without a token: no address).
func TestAPIStatusShowsMasterInQuarantine(t *testing.T) {
	_, cfg := replicatest.BeatOnBrandNewRedis(t, "apiq", "@every 1s")
	web := replicatest.Serving(t, replicatest.Running(t, cfg))
	var st struct {
		Masters []struct {
			Index int       `json:"index"`
			Addr  string    `json:"addr"`
			State string    `json:"state"`
			Why   string    `json:"why"`
			Until time.Time `json:"until"`
		} `json:"masters"`
	}
	poll.Require(t, 20*time.Second, "the master in quarantine in /api/status", func() bool {
		code, body := call(t, web, "GET", "/api/status", "", "")
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && len(st.Masters) == 1 && st.Masters[0].State == "quarantine"
	})
	m := st.Masters[0]
	if m.Index != 0 || m.Addr != "" || m.Why != "no marker: a brand-new server or one restarted empty" || time.Until(m.Until) < 30*time.Second {
		t.Errorf("master %+v: want index 0, no address, why no marker, until about a minute ahead", m)
	}
}

// With http.token set, the reads (status, locks, history: output tails can
// hold secrets) need the token too, unless http.public_reads; the dashboard
// page itself holds no data and loads without it.
func TestAPIReadsNeedTheToken(t *testing.T) {
	srv := redistest.New(t)
	reads := []string{"/api/status", "/api/locks", "/api/jobs/report/history", "/api/jobs/report/ticks", "/api/ticks"}
	web := apiServer(t, srv, apiToken)
	for _, path := range reads {
		for _, token := range []string{"", "wrong-token-0123456789"} {
			if code, body := call(t, web, "GET", path, token, ""); code != 401 || !strings.Contains(body, "a valid token is required") {
				t.Errorf("GET %s with token %q: %d %s, want 401", path, token, code, body)
			}
		}
		if code, body := call(t, web, "GET", path, apiToken, ""); code != 200 {
			t.Errorf("GET %s with the token: %d %s", path, code, body)
		}
	}
	if code, _ := call(t, web, "GET", "/", "", ""); code != 200 {
		t.Errorf("the dashboard page without the token: %d, want 200", code)
	}
	// a Basic challenge would make the dashboard's browser prompt for a
	// password on its own reads
	resp, err := http.Get(web.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("WWW-Authenticate"); len(got) != 1 || !strings.HasPrefix(got[0], "Bearer ") {
		t.Errorf("a read without the token is challenged with %q, want Bearer only", got)
	}

	public := apiServerHTTP(t, srv, fmt.Sprintf("{token: %q, public_reads: true}", apiToken))
	for _, path := range reads {
		if code, body := call(t, public, "GET", path, "", ""); code != 200 {
			t.Errorf("GET %s with public_reads, no token: %d %s", path, code, body)
		}
	}
	if code, _ := call(t, public, "POST", "/api/jobs/report/pause", "", ""); code != 401 {
		t.Errorf("pause with public_reads, no token: %d, want 401", code)
	}

	open := apiServer(t, srv, "")
	for _, path := range reads {
		if code, body := call(t, open, "GET", path, "", ""); code != 200 {
			t.Errorf("GET %s without http.token: %d %s", path, code, body)
		}
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
	other := replicatest.OneJobConfig(t, srv.Addr(), "other", "")
	c, err := baton.NewCluster(other)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tk, err := c.Trigger(context.Background(), "b", "operator")
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
	if len(replicatest.PendingTasks(t, rdb, "other:default")) == 0 {
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

// With http.public_reads anyone who reaches the API reads the tick ledger:
// when the queue Redis does not answer, the ledger's error names no
// address of it (as /api/status and /readyz do not).
func TestPublicTicksReadNamesNoRedisAddressWhenRedisIsDown(t *testing.T) {
	srv := redistest.New(t)
	public := apiServerHTTP(t, srv, fmt.Sprintf("{token: %q, public_reads: true}", apiToken))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(srv.Addr(), ":")
	for _, path := range []string{"/api/ticks", "/api/jobs/report/ticks"} {
		code, body := call(t, public, "GET", path, "", "")
		if code == 200 {
			t.Errorf("GET %s with the queue Redis down: 200 %s", path, body)
		}
		if strings.Contains(body, port) {
			t.Errorf("GET %s without a token, the queue Redis down: %d %s: names its address", path, code, body)
		}
	}
}

// A path served under other methods answers 405 naming them; an error's
// text keeps "<" and ">" (a JSON answer, not HTML); a missing token's 401
// offers only what /api/ takes (Bearer).
func TestAPIWrongMethodIs405AndErrorsReadAsWritten(t *testing.T) {
	web := apiServer(t, redistest.New(t), apiToken)
	req, _ := http.NewRequest("POST", web.URL+"/api/status", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" || !strings.Contains(string(b), "this endpoint takes GET") {
		t.Errorf("POST /api/status: %d Allow %q %s", resp.StatusCode, resp.Header.Get("Allow"), b)
	}
	if code, body := call(t, web, "GET", "/api/nothing", apiToken, ""); code != 404 {
		t.Errorf("GET /api/nothing: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/api/jobs/%3Cx%3E/history", apiToken, ""); code != 404 || !strings.Contains(body, `\"<x>\"`) {
		t.Errorf("an unknown job's error: %d %s, want its name as written", code, body)
	}
	if code, body := call(t, web, "GET", "/api/status", "wrong", ""); code != 401 || strings.Contains(body, "Basic") {
		t.Errorf("a wrong token: %d %s, want 401 offering Bearer only", code, body)
	}
}

// A singleton's leader reads in the status's JSON as the dashboard reads
// it: {"id", "since", "fence"} (the dashboard said "led by undefined").
func TestStatusJSONNamesTheLeaderAsTheDashboardReadsIt(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: leadjson
jobs:
  - name: pump
    mode: singleton
    exec: {command: ["sleep", "60"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithReplicaID("l1")))
	poll.Require(t, 20*time.Second, "the leader in the status's JSON", func() bool {
		_, body := call(t, web, "GET", "/api/status", "", "")
		return strings.Contains(body, `"leader": {`) && strings.Contains(body, `"id": "l1"`) && strings.Contains(body, `"fence": `)
	})
}
