package main

import "testing"

// validate accepts a list with Go handler jobs and says, per job, that only
// a Go program that registers the handler can run it.
func TestValidateNamesGoHandlerJobs(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `redis:
  url: redis://127.0.0.1:1/0
jobs:
  - name: tidy
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: vacuum
    schedule: "@hourly"
    handler: {name: vacuum-db}
`)
	code, out, errs := runIn("validate", path)
	want := "ok: 2 jobs\n" + `job "vacuum" (line 7) runs Go handler "vacuum-db": only a Go program that registers it can run this list` + "\n"
	if code != 0 || out != want || errs != "" {
		t.Errorf("validate: %d %q %q, want 0 %q", code, out, errs, want)
	}
}
