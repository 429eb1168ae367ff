package batonhttp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redistest"
)

// A pause through the API records who (api, or api:NAME), since when and
// why; the status shows them; pausing again replaces who and why and keeps
// since when; bad bodies are refused with what is wrong.
func TestAPIPauseWithNote(t *testing.T) {
	srv := redistest.New(t)
	web := apiServer(t, srv, apiToken)
	status := func() baton.JobStatus {
		t.Helper()
		code, body := call(t, web, "GET", "/api/status", apiToken, "")
		var st baton.Status
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Jobs) == 0 || st.Jobs[0].Name != "report" {
			t.Fatalf("status: %d %s", code, body)
		}
		return st.Jobs[0]
	}
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/api/jobs/report/pause", `{"notes": "x"}`, 400, `unknown field \"notes\"`},
		{"/api/jobs/report/pause", `{"note": 5}`, 400, "not the JSON this call takes"},
		{"/api/jobs/report/pause", `{"note": "x"`, 400, "not the JSON this call takes"},
		{"/api/jobs/report/pause", `{"note": "` + strings.Repeat("n", baton.MaxPauseNote+1) + `"}`, 400, "the note is 501 bytes, over the limit of 500"},
		{"/api/jobs/report/pause", `{"by": "a\nb"}`, 400, "one printable line"},
		{"/api/jobs/report/resume", `{"catch_up": "yes"}`, 400, "not the JSON this call takes"},
		{"/api/jobs/report/resume", `{"skip": true}`, 400, `unknown field \"skip\"`},
		{"/api/jobs/tidy/resume", `{"catch_up": true}`, 400, "only cron jobs"},
		{"/api/jobs/pump/resume", `{"catch_up": true}`, 409, "singleton"},
	} {
		if code, body := call(t, web, "POST", tc.path, apiToken, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d and %q", tc.path, tc.body[:min(len(tc.body), 40)], code, body, tc.code, tc.want)
		}
	}
	if js := status(); js.Paused {
		t.Fatalf("paused by a refused request: %+v", js)
	}

	note := `waiting for vendor fix <script>alert(1)</script>`
	code, body := call(t, web, "POST", "/api/jobs/report/pause", apiToken, fmt.Sprintf(`{"note": %q, "by": "alice"}`, note))
	var res baton.PauseResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || !res.InEffect || res.Pause == nil || res.Pause.By != "api:alice" || res.Pause.Note != note || res.Pause.At.IsZero() {
		t.Fatalf("pause: %d %s", code, body)
	}
	js := status()
	if !js.Paused || js.PausedBy != "api:alice" || js.PauseNote != note || !js.PausedSince.Equal(res.Pause.At) {
		t.Errorf("status after the pause: %+v, want by api:alice since %s, note %q", js, res.Pause.At, note)
	}
	if d := time.Since(js.PausedSince); d < -time.Minute || d > time.Minute {
		t.Errorf("paused since %s: not now", js.PausedSince)
	}
	// again, without a body: who is "api", the note is gone, since stays
	if code, body := call(t, web, "POST", "/api/jobs/report/pause", apiToken, ""); code != 200 {
		t.Fatalf("pause again: %d %s", code, body)
	}
	if js := status(); !js.Paused || js.PausedBy != "api" || js.PauseNote != "" || !js.PausedSince.Equal(res.Pause.At) {
		t.Errorf("status after pausing again: %+v, want by api, no note, since %s", js, res.Pause.At)
	}
	code, body = call(t, web, "POST", "/api/jobs/report/resume", apiToken, `{"catch_up": false}`)
	if code != 200 || !strings.Contains(body, `"in_effect": true`) || strings.Contains(body, "catch_up") {
		t.Fatalf("resume: %d %s", code, body)
	}
	if js := status(); js.Paused || js.PausedBy != "" || js.PauseNote != "" || !js.PausedSince.IsZero() {
		t.Errorf("status after the resume: %+v", js)
	}
}
