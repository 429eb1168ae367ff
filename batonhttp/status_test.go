package batonhttp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
)

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
	h := batonhttp.NewHandler(r)
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

// A replica whose lock master waits out its restart quarantine is ready
// (it serves the API and claims once the master votes), and /readyz says
// what it waits for: the master, why and until when, without its address.
func TestReadyzNamesAMasterInQuarantine(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
namespace: ready
jobs:
  - name: beat
    schedule: "@every 1s"
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithLogger(slog.New(slog.DiscardHandler))))
	var code int
	var body string
	poll.Require(t, 30*time.Second, "/readyz naming the quarantine", func() bool {
		resp, err := http.Get(web.URL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return strings.Contains(body, "restart quarantine until")
	})
	if code != http.StatusOK || !strings.HasPrefix(body, "ok\n") {
		t.Errorf("/readyz during a quarantine: %d %q, want 200 ok", code, body)
	}
	if !strings.Contains(body, "lock master 0 in its restart quarantine") || !strings.Contains(body, "no marker") {
		t.Errorf("/readyz does not say which master waits and why: %q", body)
	}
	if strings.Contains(body, srv.Addr()) {
		t.Errorf("/readyz names the master's address: %q", body)
	}
}
