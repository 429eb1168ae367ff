package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redistest"
)

// baton ticks prints every tick of the window with its outcome, a failed
// run's exit code and reason, forged text from Redis escaped on its row;
// --json prints the ledger as the API answers it; bad windows, unknown
// jobs and singletons are usage errors naming what is wrong.
func TestTicksCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
namespace: ledger
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr()))
	hour := time.Now().UTC().Truncate(time.Hour)
	from, to := hour.Add(-3*time.Hour), hour.Add(-time.Hour)
	forgeHistory(t, srv, "ledger", "report", from, "run-1", "failed", forged+"\t2026-11-28T09:00:00Z\tok\nnext row")
	window := []string{"--config", cfg, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "report"}

	code, out, errs := runIn(append([]string{"ticks", "--json"}, window...)...)
	var l baton.TickLedger
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("ticks --json: %d %q %q", code, out, errs)
	}
	if l.Job != "report" || !l.From.Equal(from) || !l.To.Equal(to) || len(l.Ticks) != 3 || l.Ticks[0].Outcome != baton.OutcomeFailed ||
		l.Ticks[0].RunID != "run-1" || l.Ticks[0].Output == "" {
		t.Errorf("ticks --json: %s", out)
	}
	for _, key := range []string{`"known_from"`, `"outcome": "failed"`, `"status": "failed"`, `"run_id": "run-1"`} {
		if !strings.Contains(out, key) {
			t.Errorf("ticks --json lacks %s: %s", key, out)
		}
	}

	code, out, errs = runIn(append([]string{"ticks"}, window...)...)
	if code != 0 {
		t.Fatalf("ticks: exit %d\n%s%s", code, out, errs)
	}
	if strings.ContainsAny(out, "\x1b\t") {
		t.Errorf("ticks printed raw control characters:\n%q", out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "report: 3 ticks from "+from.Format(time.RFC3339)) || !strings.HasPrefix(lines[1], "TICK") {
		t.Fatalf("ticks printed %d lines, want a summary, the header and 3 rows:\n%s", len(lines), out)
	}
	if row := lines[2]; !strings.HasPrefix(strings.Join(strings.Fields(row)[:3], " "), from.Format(time.RFC3339)+" failed run-1") ||
		!strings.Contains(row, `"\x1b[2K\x1b[1G ok\t2026-11-28T09:00:00Z\tok", output: "\x1b[2K\x1b[1G ok"`) {
		t.Errorf("the failed tick's row does not show its outcome, run and reason escaped:\n%s", row)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ticks", "--config", cfg}, "name one job"},
		{[]string{"ticks", "--config", cfg, "nope"}, `no job "nope"`},
		{[]string{"ticks", "--config", cfg, "pump"}, "singleton"},
		{[]string{"ticks", "--config", cfg, "--from", "yesterday", "report"}, `--from "yesterday": want an RFC 3339 time`},
		{[]string{"ticks", "--config", cfg, "--to", "2026-13-01T00:00:00Z", "report"}, "--to"},
		{[]string{"ticks", "--config", cfg, "--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339), "report"}, "before it starts"},
		{[]string{"ticks", "--config", cfg, "--from", "2020-01-01T00:00:00Z", "report"}, "more than 10000 ticks"},
	} {
		if code, _, errs := runIn(tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: %d %q, want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
