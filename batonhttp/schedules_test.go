package batonhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
)

// schedulesAPI serves the HTTP handler of one (not started) replica of a
// config with no job of its own on srv; http is its http section (a YAML
// flow mapping).
func schedulesAPI(t *testing.T, srv *redistest.Server, http string) *httptest.Server {
	t.Helper()
	cfg := replicatest.SchedulesConfig(t, srv, fmt.Sprintf("http: %s\nschedules: {http_prefixes: [\"https://hooks.example/tenants/\"]}", http))
	r, err := baton.New(cfg, baton.WithReplicaID("api-1"))
	if err != nil {
		t.Fatal(err)
	}
	h := batonhttp.NewHandler(r)
	web := httptest.NewServer(h)
	t.Cleanup(func() {
		web.Close()
		h.Close()
		r.Close()
	})
	return web
}

// callWith is call with extra request headers.
func callWith(t *testing.T, web *httptest.Server, method, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, web.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const tenantReport = `schedule: "0 9 * * 1"
timezone: Europe/Berlin
handler:
  name: report
  payload: {tenant: 42}
`

// A runtime schedule is put (YAML or JSON), read, listed in pages and
// deleted through the API, the id's '/' as it is or escaped.
func TestSchedulesAPIPutGetListDelete(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	code, body := call(t, web, "PUT", "/api/schedules/report/tenant-42", apiToken, tenantReport)
	var s baton.Schedule
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil || s.ID != "report/tenant-42" || s.Job != "@report/tenant-42" || s.Version < 1 {
		t.Fatalf("put: %d %s", code, body)
	}
	code, body = call(t, web, "GET", "/api/schedules/report%2Ftenant-42?next=3", apiToken, "")
	var got baton.Schedule
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Version != s.Version || len(got.Next) != 3 ||
		got.Next[0].In(time.UTC).Weekday() != time.Monday || !strings.Contains(body, `"tenant": 42`) {
		t.Fatalf("get: %d %s", code, body)
	}
	for i := range 4 {
		if code, body := call(t, web, "PUT", fmt.Sprintf("/api/schedules/report/tenant-%d", i), apiToken,
			`{"schedule": "@daily", "http": {"url": "https://hooks.example/tenants/1/report"}}`); code != 200 {
			t.Fatalf("put %d: %d %s", i, code, body)
		}
	}
	var ids []string
	after := ""
	for range 5 {
		code, body := call(t, web, "GET", "/api/schedules?prefix=report/&limit=2&next=1&after="+after, apiToken, "")
		var page baton.SchedulePage
		if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("list: %d %s", code, body)
		}
		for _, s := range page.Schedules {
			ids = append(ids, s.ID)
			if len(s.Next) != 1 {
				t.Errorf("%s listed without its next tick: %s", s.ID, body)
			}
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if strings.Join(ids, " ") != "report/tenant-0 report/tenant-1 report/tenant-2 report/tenant-3 report/tenant-42" {
		t.Fatalf("listed %v", ids)
	}
	if code, body := call(t, web, "DELETE", "/api/schedules/report/tenant-42", apiToken, ""); code != 200 || !strings.Contains(body, `"deleted": "report/tenant-42"`) {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body := call(t, web, "DELETE", "/api/schedules/report/tenant-42", apiToken, ""); code != 404 || !strings.Contains(body, "no such runtime schedule") {
		t.Fatalf("delete again: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/api/schedules/report/tenant-42", apiToken, ""); code != 404 {
		t.Fatalf("get after delete: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/api/schedules?prefix=nothing/", apiToken, ""); code != 200 || !strings.Contains(body, `"schedules": []`) {
		t.Fatalf("empty list: %d %s", code, body)
	}
}

// DELETE ?stop=true asks the workers running the schedule to stop its run:
// a request on the job's cancel channel.
func TestSchedulesAPIDeleteStopAsksRunsToStop(t *testing.T) {
	srv := redistest.New(t)
	web := schedulesAPI(t, srv, fmt.Sprintf("{token: %q}", apiToken))
	if code, body := call(t, web, "PUT", "/api/schedules/report/tenant-42", apiToken, tenantReport); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	ctx := context.Background()
	sub := srv.TestClient(t).Subscribe(ctx, "rt:cancel:@report/tenant-42")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // subscribed
		t.Fatal(err)
	}
	if code, body := call(t, web, "DELETE", "/api/schedules/report/tenant-42?stop=true", apiToken, ""); code != 200 {
		t.Fatalf("delete --stop: %d %s", code, body)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil || !strings.Contains(msg.Payload, `"deleted"`) {
		t.Fatalf("stop request: %v %v", msg, err)
	}
	if code, body := call(t, web, "DELETE", "/api/schedules/x?stop=maybe", apiToken, ""); code != 400 || !strings.Contains(body, "stop must be true or false") {
		t.Fatalf("bad stop: %d %s", code, body)
	}
}

// If-Match puts only over the version given (0: only a new schedule); a
// put over another answers 412.
func TestSchedulesAPIIfMatchConflict(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": "0"})
	var s baton.Schedule
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("create with If-Match 0: %d %s", code, body)
	}
	if code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": "0"}); code != 412 || !strings.Contains(body, "changed since the version given") {
		t.Fatalf("create again with If-Match 0: %d %s", code, body)
	}
	if code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": fmt.Sprint(s.Version + 7)}); code != 412 {
		t.Fatalf("put over a version it is not at: %d %s", code, body)
	}
	if code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": fmt.Sprintf("%q", fmt.Sprint(s.Version))}); code != 200 {
		t.Fatalf("put over its version (quoted, as an ETag): %d %s", code, body)
	}
	for _, bad := range []string{"*", `W/"1"`, `"1`, `1"`, `"1", "2"`, `"1-"`, `"-5"`, `"+1"`} {
		if code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": bad}); code != 400 || !strings.Contains(body, "If-Match must be") {
			t.Fatalf("If-Match %s: %d %s", bad, code, body)
		}
	}
}

// A refused definition answers 400 with every problem: field, line in
// the body and why; a bad id, query or body names what is wrong.
func TestSchedulesAPIFieldErrors(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	code, body := call(t, web, "PUT", "/api/schedules/a", apiToken, "schedule: \"61 * * * *\"\ntimezone: Mars/Olympus\nexec: {command: [rm, -rf, /]}\n")
	var answer struct {
		Error  string
		Errors []struct {
			Field string
			Line  int
			Msg   string
		}
	}
	if code != 400 || json.Unmarshal([]byte(body), &answer) != nil || len(answer.Errors) < 3 {
		t.Fatalf("bad definition: %d %s", code, body)
	}
	lines := map[string]int{}
	for _, e := range answer.Errors {
		lines[e.Field] = e.Line
		if e.Msg == "" {
			t.Errorf("a problem without its reason: %s", body)
		}
	}
	if lines["schedule"] != 1 || lines["timezone"] != 2 || !strings.Contains(body, "commands come only from the config file") {
		t.Fatalf("problems by field and line %v: %s", lines, body)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/api/schedules/a:b", tenantReport, 400, "invalid schedule id"},
		{"PUT", "/api/schedules/", tenantReport, 400, "a schedule id is required"},
		{"PUT", "/api/schedules/a", "", 400, "the body is the definition"},
		{"PUT", "/api/schedules/a", "schedule: \"@daily\"\nhandler: {name: r, payload: \"" + strings.Repeat("x", 40<<10) + "\"}\n", 413, "over"},
		{"PUT", "/api/schedules/a", `{"schedule": "@daily", "http": {"url": "https://evil.example/x"}}`, 400, "under none of schedules.http_prefixes"},
		{"GET", "/api/schedules?limit=5000", "", 400, "limit must be a whole number from 0 to 1000"},
		{"GET", "/api/schedules?next=x", "", 400, "next must be"},
		{"GET", "/api/schedules/a?next=11", "", 400, "next must be"},
		{"GET", "/api/schedules/nope", "", 404, "no such runtime schedule"},
		{"POST", "/api/schedules/a", "", 405, "this endpoint takes GET or PUT or DELETE"},
	} {
		code, body := call(t, web, tc.method, tc.path, apiToken, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d and %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}

// Changes need http.token; reads need it too unless http.public_reads;
// without a token configured, changes are off.
func TestSchedulesAPINeedsTheToken(t *testing.T) {
	srv := redistest.New(t)
	web := schedulesAPI(t, srv, fmt.Sprintf("{token: %q}", apiToken))
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/api/schedules/a", tenantReport},
		{"DELETE", "/api/schedules/a", ""},
		{"GET", "/api/schedules/a", ""},
		{"GET", "/api/schedules", ""},
		{"POST", "/api/jobs/%40a/pause", ""},
	} {
		if code, body := call(t, web, tc.method, tc.path, "", tc.body); code != 401 || !strings.Contains(body, "a valid token is required") {
			t.Errorf("%s %s without the token: %d %s", tc.method, tc.path, code, body)
		}
	}
	public := schedulesAPI(t, srv, fmt.Sprintf("{token: %q, public_reads: true}", apiToken))
	if code, body := call(t, public, "GET", "/api/schedules", "", ""); code != 200 {
		t.Errorf("public read: %d %s", code, body)
	}
	if code, body := call(t, public, "PUT", "/api/schedules/a", "", tenantReport); code != 401 {
		t.Errorf("put without the token, public reads: %d %s", code, body)
	}
	none := schedulesAPI(t, srv, "{}")
	if code, body := call(t, none, "PUT", "/api/schedules/a", "anything", tenantReport); code != 403 || !strings.Contains(body, "set http.token") {
		t.Errorf("put without a token configured: %d %s", code, body)
	}
}

// The job routes take a runtime schedule's job name "@" + id as one path
// segment, its '/' escaped (%2F): ServeMux matches the escaped path and
// hands the segment unescaped. Unescaped, the '/' splits the name and no
// route matches.
func TestJobRoutesTakeAnEscapedRuntimeScheduleName(t *testing.T) {
	srv := redistest.New(t)
	web := schedulesAPI(t, srv, fmt.Sprintf("{token: %q}", apiToken))
	if code, body := call(t, web, "PUT", "/api/schedules/report/tenant-42", apiToken, tenantReport); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	const job = "/api/jobs/%40report%2Ftenant-42"
	code, body := call(t, web, "POST", job+"/pause", apiToken, `{"note": "tenant on hold"}`)
	if code != 200 || !strings.Contains(body, `"job": "@report/tenant-42"`) || !strings.Contains(body, `"in_effect": true`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", "/api/schedules/report/tenant-42", apiToken, ""); code != 200 || !strings.Contains(body, "tenant on hold") {
		t.Fatalf("the schedule shows its pause: %d %s", code, body)
	}
	if code, body := call(t, web, "POST", job+"/resume", apiToken, ""); code != 200 || !strings.Contains(body, `"paused": false`) {
		t.Fatalf("resume: %d %s", code, body)
	}
	code, body = call(t, web, "POST", job+"/trigger", apiToken, `{"by": "alice"}`)
	if code != 200 || !strings.Contains(body, `"job": "@report/tenant-42"`) || !strings.Contains(body, `"run_id"`) {
		t.Fatalf("trigger: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", job+"/history", apiToken, ""); code != 200 || !strings.HasPrefix(body, "[") {
		t.Fatalf("history: %d %s", code, body)
	}
	if code, body := call(t, web, "GET", job+"/ticks", apiToken, ""); code != 200 || !strings.Contains(body, `"job": "@report/tenant-42"`) {
		t.Fatalf("ticks: %d %s", code, body)
	}
	if code, body := call(t, web, "POST", "/api/jobs/@report/tenant-42/pause", apiToken, ""); code != 404 {
		t.Fatalf("pause with the '/' unescaped: %d %s", code, body)
	}
	if code, body := call(t, web, "POST", "/api/jobs/%40report%2Fnobody/pause", apiToken, ""); code != 404 {
		t.Fatalf("pause of an absent schedule: %d %s", code, body)
	}
}

// The value of an http runtime schedule's header (a token, as often as
// not) is not shown by the API's answers: it reads as the job list's
// headers do in the printed config, masked.
func TestSchedulesAPIMasksHTTPHeaderValues(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	def := `schedule: "0 9 * * 1"
http:
  url: https://hooks.example/tenants/42
  headers: {Authorization: "Bearer hdr-s3cret-42"}
`
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/schedules/report/tenant-42", def},
		{"GET", "/api/schedules/report/tenant-42?next=1", ""},
		{"GET", "/api/schedules?prefix=report/", ""},
	} {
		code, body := call(t, web, c.method, c.path, apiToken, c.body)
		if code != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
		if strings.Contains(body, "hdr-s3cret-42") || !strings.Contains(body, "Authorization") {
			t.Fatalf("%s %s shows the header's value, or not its name: %s", c.method, c.path, body)
		}
	}
}

// A put no live replica can run answers 422 naming the handler meant; with
// ?force=true it is stored, and the answer says it waits.
func TestSchedulesAPIRefusesAScheduleNoLiveReplicaCanRun(t *testing.T) {
	srv := redistest.New(t)
	cfg := replicatest.SchedulesConfig(t, srv, fmt.Sprintf("http: {token: %q}", apiToken))
	c := replicatest.OpenCluster(t, cfg)
	web := replicatest.Serving(t, replicatest.HandlerReplica(t, c, cfg, "r1", "report"))
	typo := strings.Replace(tenantReport, "name: report", "name: reprot", 1)
	if code, body := call(t, web, "PUT", "/api/schedules/report/tenant-44", apiToken, typo); code != 422 ||
		!strings.Contains(body, `no live replica registers Go handler \"reprot\" (did you mean \"report\"?)`) || !strings.Contains(body, "?force=true") {
		t.Fatalf("put of a mistyped handler: %d %s", code, body)
	}
	if code, body := call(t, web, "PUT", "/api/schedules/report/tenant-44?force=maybe", apiToken, typo); code != 400 || !strings.Contains(body, "force must be true or false") {
		t.Fatalf("?force=maybe: %d %s", code, body)
	}
	code, body := call(t, web, "PUT", "/api/schedules/report/tenant-44?force=true", apiToken, typo)
	var s baton.Schedule
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil || !strings.Contains(s.Waiting, `"reprot"`) {
		t.Fatalf("put with force: %d %s, want it stored and waiting", code, body)
	}
}

// A schedule's answers carry its version and created time as an ETag,
// which If-Match takes back; putting the same definition again changes
// nothing; a schedule deleted and put again is at version 1 again, and the
// first one's ETag does not match it.
func TestSchedulesAPIETagRoundTripsAndTheSamePutChangesNothing(t *testing.T) {
	srv := redistest.New(t)
	web := schedulesAPI(t, srv, fmt.Sprintf("{token: %q}", apiToken))
	req := func(method, body string, header map[string]string) (*http.Response, string) {
		t.Helper()
		r, err := http.NewRequest(method, web.URL+"/api/schedules/report/tenant-42", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+apiToken)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	put, body := req("PUT", tenantReport, nil)
	var s baton.Schedule
	if put.StatusCode != 200 || json.Unmarshal([]byte(body), &s) != nil || s.Version != 1 ||
		put.Header.Get("ETag") != fmt.Sprintf(`"1-%d"`, s.Created.UnixMilli()) {
		t.Fatalf("put: %d ETag %q %s", put.StatusCode, put.Header.Get("ETag"), body)
	}
	get, _ := req("GET", "", nil)
	etag := get.Header.Get("ETag")
	if etag != put.Header.Get("ETag") {
		t.Fatalf("GET's ETag %q, the put's %q", etag, put.Header.Get("ETag"))
	}
	again, body := req("PUT", tenantReport, map[string]string{"If-Match": etag})
	if again.StatusCode != 200 || again.Header.Get("ETag") != etag {
		t.Fatalf("the same definition again: %d ETag %q (was %q) %s", again.StatusCode, again.Header.Get("ETag"), etag, body)
	}
	changed, body := req("PUT", strings.Replace(tenantReport, "tenant: 42", "tenant: 43", 1), map[string]string{"If-Match": etag})
	if changed.StatusCode != 200 || changed.Header.Get("ETag") == etag {
		t.Fatalf("a change over the ETag: %d ETag %q %s", changed.StatusCode, changed.Header.Get("ETag"), body)
	}
	if stale, body := req("PUT", tenantReport, map[string]string{"If-Match": etag}); stale.StatusCode != 412 {
		t.Fatalf("a put over a stale ETag: %d %s", stale.StatusCode, body)
	}
	// deleted and put again: version 1 again, but not the schedule the
	// first ETag named
	if del, body := req("DELETE", "", nil); del.StatusCode != 200 {
		t.Fatalf("delete: %d %s", del.StatusCode, body)
	}
	rdb := srv.TestClient(t)
	for i := 0; i < 1e6 && rdb.Time(context.Background()).Val().UnixMilli() <= s.Created.UnixMilli(); i++ {
	}
	if fresh, body := req("PUT", tenantReport, nil); fresh.StatusCode != 200 || !strings.HasPrefix(fresh.Header.Get("ETag"), `"1-`) || fresh.Header.Get("ETag") == etag {
		t.Fatalf("put again after the delete: %d ETag %q (the first %q) %s", fresh.StatusCode, fresh.Header.Get("ETag"), etag, body)
	}
	if aba, body := req("PUT", tenantReport, map[string]string{"If-Match": etag}); aba.StatusCode != 412 || !strings.Contains(body, "deleted and put again") {
		t.Fatalf("a put over the deleted schedule's ETag: %d %s", aba.StatusCode, body)
	}
}

// If-Match sent as two header fields is a list of tags, as one field with
// a comma is (RFC 9110 §5.3), and is refused alike: a put is conditioned on
// one schedule's version, not on the first field alone.
func TestSchedulesAPIIfMatchInTwoFieldsIsRefused(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	if code, body := callWith(t, web, "PUT", "/api/schedules/a", tenantReport, map[string]string{"If-Match": "0"}); code != 200 {
		t.Fatalf("create with If-Match 0: %d %s", code, body)
	}
	for _, tags := range [][]string{{`"1"`, `"7"`}, {`"7"`, `"1"`}} {
		req, err := http.NewRequest("PUT", web.URL+"/api/schedules/a", strings.NewReader(tenantReport))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		for _, tag := range tags {
			req.Header.Add("If-Match", tag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "If-Match must be") {
			t.Errorf("If-Match %s in two fields: %d %s, want 400 as for the list in one", strings.Join(tags, " then "), resp.StatusCode, b)
		}
	}
}

// A DELETE takes If-Match as a PUT does: a stale ETag or version answers
// 412 and deletes nothing; the schedule's ETag deletes it; an If-Match for
// a schedule that does not exist answers 412 (it did not match), not 404.
func TestSchedulesAPIDeleteTakesIfMatch(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	must := func(code int, body string) {
		t.Helper()
		if code != 200 {
			t.Fatalf("put: %d %s", code, body)
		}
	}
	var first, second baton.Schedule
	code, body := callWith(t, web, "PUT", "/api/schedules/d/1", tenantReport, nil)
	must(code, body)
	_ = json.Unmarshal([]byte(body), &first)
	code, body = callWith(t, web, "PUT", "/api/schedules/d/1", strings.Replace(tenantReport, "tenant: 42", "tenant: 43", 1), nil)
	must(code, body)
	_ = json.Unmarshal([]byte(body), &second)
	for _, stale := range []string{first.ETag(), "1", "9"} {
		if code, body := callWith(t, web, "DELETE", "/api/schedules/d/1", "", map[string]string{"If-Match": stale}); code != 412 {
			t.Fatalf("DELETE over %s: %d %s, want 412", stale, code, body)
		}
	}
	if code, body := callWith(t, web, "GET", "/api/schedules/d/1", "", nil); code != 200 {
		t.Fatalf("a refused conditional DELETE deleted it: %d %s", code, body)
	}
	if code, body := callWith(t, web, "DELETE", "/api/schedules/d/1", "", map[string]string{"If-Match": `W/"2"`}); code != 400 {
		t.Fatalf("DELETE with a weak tag: %d %s, want 400", code, body)
	}
	if code, body := callWith(t, web, "DELETE", "/api/schedules/d/1", "", map[string]string{"If-Match": second.ETag()}); code != 200 {
		t.Fatalf("DELETE over its ETag: %d %s", code, body)
	}
	if code, body := callWith(t, web, "DELETE", "/api/schedules/d/1", "", map[string]string{"If-Match": second.ETag()}); code != 412 || !strings.Contains(body, "does not exist") {
		t.Fatalf("a conditional DELETE of none: %d %s, want 412", code, body)
	}
}

// An If-Match field sent empty (a client whose ETag variable was empty)
// conditions nothing it could match: it is refused (400), as a tag that is
// no ETag is, and neither deletes nor replaces whatever is there.
func TestSchedulesAPIEmptyIfMatchIsRefused(t *testing.T) {
	web := schedulesAPI(t, redistest.New(t), fmt.Sprintf("{token: %q}", apiToken))
	code, body := callWith(t, web, "PUT", "/api/schedules/e/1", tenantReport, nil)
	if code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	var put baton.Schedule
	_ = json.Unmarshal([]byte(body), &put)
	for _, empty := range []string{"", "  "} {
		if code, body := callWith(t, web, "DELETE", "/api/schedules/e/1", "", map[string]string{"If-Match": empty}); code != 400 || !strings.Contains(body, "If-Match must be") {
			t.Errorf("DELETE with If-Match %q: %d %s, want 400", empty, code, body)
		}
		if code, body := callWith(t, web, "PUT", "/api/schedules/e/1", strings.Replace(tenantReport, "tenant: 42", "tenant: 43", 1), map[string]string{"If-Match": empty}); code != 400 || !strings.Contains(body, "If-Match must be") {
			t.Errorf("PUT with If-Match %q: %d %s, want 400", empty, code, body)
		}
	}
	code, body = callWith(t, web, "GET", "/api/schedules/e/1", "", nil)
	var got baton.Schedule
	_ = json.Unmarshal([]byte(body), &got)
	if code != 200 || got.ETag() != put.ETag() {
		t.Fatalf("after the refused changes: %d, ETag %s, want the schedule put, %s", code, got.ETag(), put.ETag())
	}
}
