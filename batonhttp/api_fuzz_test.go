package batonhttp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

const fuzzToken = "fuzz-token-0123456789"

// FuzzAPI sends any method, path and body to the JSON API of a replica
// over a real Redis, with the token: every answer is a status below 500
// (bad input is the caller's fault) or 503 (what Redis could not do), and
// every /api/ answer is JSON, an error with a message when it is not 2xx.
func FuzzAPI(f *testing.F) {
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/jobs/report/pause", ""},
		{"POST", "/api/jobs/report/resume", "{}"},
		{"POST", "/api/jobs/report/trigger", `{"by": "alice"}`},
		{"POST", "/api/jobs/report/trigger", `{"by": "a\nb"}`},
		{"POST", "/api/jobs/report/backfill", `{"from": "2026-11-25T02:00:00Z", "to": "2026-11-25T06:00:00Z", "dry_run": true}`},
		{"POST", "/api/jobs/report/backfill", `{"from": "yesterday"}`},
		{"POST", "/api/jobs/report/backfill", `{"from": "2026-11-25T02:00:00Z", "to": "2026-11-25T06:00:00Z", "dry_run": true, "chain": true}`},
		{"POST", "/api/jobs/nope/trigger", `{"x": 1}`},
		{"GET", "/api/status", ""},
		{"GET", "/api/jobs/report/history?n=-1", ""},
		{"GET", "/api/locks", ""},
		{"DELETE", "/api/jobs/report", ""},
		{"POST", "/api/jobs/%2e%2e/pause", "[]"},
	} {
		f.Add(c.method, c.path, []byte(c.body))
	}
	srv := redistest.New(f)
	web := apiServer(f, srv, fuzzToken)
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		// a raw space or control byte in the request line is refused by
		// net/http itself ("400 Bad Request", not baton's answer); a query
		// only as ?n=
		if !strings.HasPrefix(path, "/api/") || strings.ContainsAny(path, " \r\n\t#") ||
			strings.Contains(path, "?") && !strings.Contains(path, "?n=") {
			return
		}
		req, err := http.NewRequest(method, web.URL+path, strings.NewReader(string(body)))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Authorization", "Bearer "+fuzzToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // the client refused it
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: status %d", method, path, body, resp.StatusCode)
		}
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s %s %q: status %d, not JSON: %v", method, path, body, resp.StatusCode, err)
		}
		if resp.StatusCode >= 300 {
			m, _ := v.(map[string]any)
			if msg, _ := m["error"].(string); msg == "" {
				t.Fatalf("%s %s %q: status %d without an error message: %v", method, path, body, resp.StatusCode, v)
			}
		}
	})
}
