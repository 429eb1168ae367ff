package batonhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

// The handler answers only its own names: a page whose DNS name was
// rebound to baton's address (Host and Origin evil.example, the browser
// sending them as same-origin) reads and changes nothing, even with the
// token, while the configured names (and *.NAME for a wildcard), IP
// addresses and localhost pass; probes answer whatever the Host.
func TestHTTPAnswersOnlyItsOwnNames(t *testing.T) {
	web := apiServerHTTP(t, redistest.New(t), fmt.Sprintf(`{token: %q, hosts: [baton.example, "*.ops.example"]}`, apiToken))
	port := web.URL[strings.LastIndexByte(web.URL, ':'):]
	do := func(method, host, origin, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, web.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin") // what a browser says of a rebound page's own requests
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example", "evil.example" + port, "ops.example", "baton.example.evil.example",
		"localhost.evil.example", "127.0.0.1.evil.example", "xbaton.example"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/status"}, {"GET", "/api/jobs/report/history"}, {"GET", "/api/locks"}, {"GET", "/"},
			{"GET", "/metrics"}, {"GET", "/queues/"}, {"POST", "/api/jobs/report/pause"}, {"GET", "/healthz/../api/status"},
		} {
			code, body := do(c.method, host, "http://"+host, c.path)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "add the name to http.hosts") {
				t.Errorf("%s %s with Host %s: %d %.200s, want 421 naming http.hosts", c.method, c.path, host, code, body)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := do("GET", "evil.example", "", path); code == http.StatusMisdirectedRequest {
			t.Errorf("probe %s with a foreign Host: %d %s, want it answered", path, code, body)
		}
	}
	for _, host := range []string{"baton.example", "baton.example" + port, "BATON.Example.", "a.ops.example" + port, "b.a.ops.example",
		"127.0.0.1" + port, "[::1]" + port, "localhost" + port, "dash.localhost" + port} {
		if code, body := do("GET", host, "http://"+host, "/api/status"); code != 200 || !strings.Contains(body, `"jobs"`) {
			t.Errorf("GET /api/status with Host %s: %d %.200s, want 200", host, code, body)
		}
	}
	// a change from the page of a configured name passes (same origin)
	if code, body := do("POST", "baton.example"+port, "http://baton.example"+port, "/api/jobs/report/pause"); code != 200 {
		t.Errorf("pause with Host and Origin baton.example: %d %s", code, body)
	}
}
