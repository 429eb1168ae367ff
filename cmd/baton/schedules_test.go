package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// schedulesConfigFile writes a config on srv with no job of its own that
// allows http jobs under https://hooks.example/tenants/.
func schedulesConfigFile(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
schedules:
  http_prefixes: ["https://hooks.example/tenants/"]
jobs: []
`, srv.Addr()))
}

// A definition put from a file (YAML) or stdin (JSON) is stored as given;
// get prints it with its next ticks, as text and as JSON.
func TestSchedulesPutFromFileAndGet(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	def := filepath.Join(t.TempDir(), "tenant-42.yaml")
	if err := writeFile(def, "schedule: \"0 9 * * 1\"\ntimezone: Europe/Berlin\nhandler:\n  name: report\n  payload: {tenant: 42}\n"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("schedules", "put", "--config", cfg, "report/tenant-42", "-f", def)
	if code != 0 || !strings.HasPrefix(out, "report/tenant-42 put: version 1 (etag \"1-") || !strings.Contains(out, "\"), job @report/tenant-42, next tick ") {
		t.Fatalf("put -f: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("schedules", "get", "--config", cfg, "--next", "2", "report/tenant-42")
	if code != 0 || !strings.Contains(out, "job:        @report/tenant-42") || !strings.Contains(out, `"tenant": 42`) ||
		!strings.Contains(out, `"timezone": "Europe/Berlin"`) || strings.Count(out, "T09:00:00+01:00")+strings.Count(out, "T09:00:00+02:00") != 2 {
		t.Fatalf("get: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("schedules", "get", "--config", cfg, "--json", "report/tenant-42")
	var s baton.Schedule
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Version != 1 || len(s.Next) != 3 || s.Next[0].In(time.UTC).Weekday() != time.Monday {
		t.Fatalf("get --json: %d %q %q", code, out, errs)
	}

	old := stdin
	t.Cleanup(func() { stdin = old })
	stdin = strings.NewReader(`{"schedule": "@daily", "http": {"url": "https://hooks.example/tenants/42/report", "method": "POST"}}`)
	if code, out, errs := runIn("schedules", "put", "--config", cfg, "--if-version", "1", "report/tenant-42", "-f", "-"); code != 0 || !strings.Contains(out, "version 2") {
		t.Fatalf("put -f - over version 1: %d %q %q", code, out, errs)
	}
	stdin = strings.NewReader(`{"schedule": "@daily", "handler": {"name": "report"}}`)
	if code, _, errs := runIn("schedules", "put", "--config", cfg, "--if-version", "1", "report/tenant-42", "-f", "-"); code != 1 || !strings.Contains(errs, "is at version 2, not 1") {
		t.Fatalf("put over a version it is no longer at: %d %q", code, errs)
	}
	// --if-match takes the etag get prints: a stale one fails, the
	// current one puts; both flags at once, or a bad etag, are usage errors
	_, got, _ := runIn("schedules", "get", "--config", cfg, "report/tenant-42")
	_, etag, _ := strings.Cut(got, "etag:       ")
	etag, _, _ = strings.Cut(etag, "\n")
	if !strings.HasPrefix(etag, "\"2-") {
		t.Fatalf("get's etag line: %q", got)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--if-match", s.ETag()}, 1, "is at version 2, not 1"},
		{[]string{"--if-match", etag}, 0, "version 3"},
		{[]string{"--if-match", etag, "--if-version", "2"}, 2, "give one"},
		{[]string{"--if-match", "W/x"}, 2, "not a schedule's ETag"},
	} {
		stdin = strings.NewReader(`{"schedule": "@weekly", "handler": {"name": "report"}}`)
		code, out, errs := runIn(append([]string{"schedules", "put", "--config", cfg, "report/tenant-42", "-f", "-"}, c.args...)...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("put %v: %d %q %q, want %d and %q", c.args, code, out, errs, c.code, c.want)
		}
	}
	if code, _, errs := runIn("schedules", "get", "--config", cfg, "nobody"); code != 2 || !strings.Contains(errs, "no such runtime schedule") {
		t.Fatalf("get of an absent schedule: %d %q", code, errs)
	}
}

// put builds the definition from flags; what is wrong names the flag.
func TestSchedulesPutFromFlags(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	code, out, errs := runIn("schedules", "put", "--config", cfg, "report/tenant-7", "--schedule", "0 9 * * 1", "--timezone", "Europe/Berlin",
		"--handler", "report", "--payload", `{"tenant": 7}`, "--max-retry", "0", "--timeout", "10m", "--concurrency", "allow", "--starting-deadline", "1h")
	if code != 0 || !strings.Contains(out, "version 1") {
		t.Fatalf("put from flags: %d %q %q", code, out, errs)
	}
	_, out, _ = runIn("schedules", "get", "--config", cfg, "--json", "report/tenant-7")
	var s baton.Schedule
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal(s.Definition, &d)
	if d["schedule"] != "0 9 * * 1" || d["timezone"] != "Europe/Berlin" || d["max_retry"] != float64(0) || d["timeout"] != "10m" ||
		d["concurrency"] != "allow" || fmt.Sprint(d["handler"]) != "map[name:report payload:map[tenant:7]]" {
		t.Fatalf("stored %s", s.Definition)
	}
	if code, out, errs := runIn("schedules", "put", "--config", cfg, "hook/7", "--at", "2030-01-01T09:00:00+01:00",
		"--http-url", "https://hooks.example/tenants/7", "--http-method", "POST", "--http-header", "X-Tenant: 7"); code != 0 {
		t.Fatalf("put an http job at a time: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x", "--schedule", "61 * * * *", "--handler", "r"}, "baton schedules put: --schedule: "},
		{[]string{"x", "--schedule", "@daily", "--http-url", "https://evil.example/x"}, "--http-url: "},
		{[]string{"x", "--schedule", "@daily", "--handler", "r", "--concurrency", "sometimes"}, "--concurrency: "},
		{[]string{"x", "--schedule", "@daily", "--handler", "r", "--payload", "{tenant"}, "--payload must be JSON"},
		{[]string{"x", "--at", "tomorrow", "--handler", "r"}, "--at must be an RFC 3339 time"},
		{[]string{"x", "--schedule", "@daily", "--handler", "r", "-f", "x.yaml"}, "exclude each other"},
		{[]string{"x"}, "give the definition"},
		{[]string{"a:b", "--schedule", "@daily", "--handler", "r"}, "invalid schedule id"},
		{[]string{"x", "--schedul", "@daily"}, "did you mean --schedule?"},
	} {
		code, _, errs := runIn(append([]string{"schedules", "put", "--config", cfg}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("put %q: %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// get and list do not print an http schedule's header values (a token,
// as often as not), as text or as JSON: they are masked.
func TestSchedulesGetAndListMaskHTTPHeaderValues(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	if code, out, errs := runIn("schedules", "put", "--config", cfg, "hook/7", "--schedule", "@daily",
		"--http-url", "https://hooks.example/tenants/7", "--http-header", "Authorization: Bearer hdr-s3cret-7"); code != 0 {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	for _, args := range [][]string{
		{"get", "hook/7"}, {"get", "--json", "hook/7"}, {"list"}, {"list", "--json"},
	} {
		code, out, errs := runIn(append([]string{"schedules", args[0], "--config", cfg}, args[1:]...)...)
		if code != 0 || strings.Contains(out+errs, "hdr-s3cret-7") {
			t.Fatalf("schedules %q: %d %q %q", args, code, out, errs)
		}
	}
}

// A definition from a file that is refused prints every problem with the
// file's name and line.
func TestSchedulesPutBadFileNamesFileAndLine(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	def := filepath.Join(t.TempDir(), "bad.yaml")
	if err := writeFile(def, "# tenant 42\nschedule: \"61 * * * *\"\ntimezone: Mars/Olympus\nexec: {command: [rm, -rf, /]}\n"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("schedules", "put", "--config", cfg, "report/tenant-42", "-f", def)
	for _, want := range []string{def + `:2: job "@report/tenant-42": schedule: `, def + `:3: job "@report/tenant-42": timezone: `, def + ":4: ", "commands come only from the config file"} {
		if !strings.Contains(errs, want) {
			t.Errorf("missing %q", want)
		}
	}
	if code != 2 || out != "" {
		t.Fatalf("bad definition: %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn("schedules", "list", "--config", cfg); code != 0 {
		t.Fatalf("list: %d %q", code, errs)
	}
}

// list prints a page as a table and the command for the next page; the
// pages together hold every schedule once.
func TestSchedulesListPages(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfigFile(t, srv)
	for i := range 5 {
		if code, _, errs := runIn("schedules", "put", "--config", cfg, fmt.Sprintf("report/tenant-%d", i), "--schedule", "0 9 * * 1", "--handler", "report"); code != 0 {
			t.Fatalf("put: %q", errs)
		}
	}
	if code, _, errs := runIn("schedules", "put", "--config", cfg, "other", "--schedule", "@daily", "--handler", "x"); code != 0 {
		t.Fatalf("put: %q", errs)
	}
	if code, _, errs := runIn("schedules", "pause", "--config", cfg, "--note", "on hold", "report/tenant-1"); code != 0 {
		t.Fatalf("pause: %q", errs)
	}
	code, out, errs := runIn("schedules", "list", "--config", cfg, "--prefix", "report/", "--limit", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], "report/tenant-0  0 9 * * 1") ||
		!strings.Contains(lines[2], "by ") || lines[4] != "next page: baton schedules list --after report/tenant-2 --prefix report/" {
		t.Fatalf("first page: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runIn("schedules", "list", "--config", cfg, "--prefix", "report/", "--limit", "3", "--after", "report/tenant-2", "--json")
	var page baton.SchedulePage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Schedules) != 2 || page.Schedules[1].ID != "report/tenant-4" || page.Next != "" {
		t.Fatalf("second page: %d %s", code, out)
	}
	if code, _, errs := runIn("schedules", "list", "--config", cfg, "--limit", "5000"); code != 2 || !strings.Contains(errs, "limit 5000") {
		t.Fatalf("list --limit 5000: %d %q", code, errs)
	}
	if code, _, errs := runIn("schedules", "resume", "--config", cfg, "report/tenant-1"); code != 0 {
		t.Fatalf("resume: %q", errs)
	}
	// baton pause and resume take the job name too
	if code, out, errs := runIn("pause", "--config", cfg, "@report/tenant-3"); code != 0 || !strings.HasPrefix(out, "@report/tenant-3 paused by ") {
		t.Fatalf("baton pause @report/tenant-3: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("resume", "--config", cfg, "@report/tenant-3"); code != 0 || out != "@report/tenant-3 resumed\n" {
		t.Fatalf("baton resume @report/tenant-3: %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn("schedules", "pause", "--config", cfg, "nobody"); code != 2 || !strings.Contains(errs, "no such runtime schedule") {
		t.Fatalf("pause of an absent schedule: %d %q", code, errs)
	}
}

// delete removes the schedule; --stop also publishes the request that
// stops its runs under way.
func TestSchedulesDeleteStopAsksRunsToStop(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := schedulesConfigFile(t, srv)
	for _, id := range []string{"a", "b"} {
		if code, _, errs := runIn("schedules", "put", "--config", cfg, id, "--schedule", "@daily", "--handler", "x"); code != 0 {
			t.Fatalf("put: %q", errs)
		}
	}
	ctx := context.Background()
	sub := srv.TestClient(t).PSubscribe(ctx, "stest:cancel:*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// --if-match: a stale etag deletes nothing (exit 1), a bad one is a
	// usage error
	if code, _, errs := runIn("schedules", "delete", "--config", cfg, "--if-match", `"9-1"`, "a"); code != 1 || !strings.Contains(errs, "is at version 1, not 9") {
		t.Fatalf("delete --if-match over a stale etag: %d %q", code, errs)
	}
	if code, _, errs := runIn("schedules", "delete", "--config", cfg, "--if-match", "W/x", "a"); code != 2 || !strings.Contains(errs, "not a schedule's ETag") {
		t.Fatalf("delete --if-match with a bad etag: %d %q", code, errs)
	}
	if code, out, errs := runIn("schedules", "delete", "--config", cfg, "a"); code != 0 || out != "a deleted (a run under way finishes)\n" {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "delete", "--config", cfg, "--stop", "b"); code != 0 || !strings.Contains(out, "asked to stop") {
		t.Fatalf("delete --stop: %d %q %q", code, out, errs)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil || msg.Channel != "stest:cancel:@b" || !strings.Contains(msg.Payload, `"deleted"`) {
		t.Fatalf("stop request (only for b): %v %v", msg, err)
	}
	if code, _, errs := runIn("schedules", "delete", "--config", cfg, "a"); code != 2 || !strings.Contains(errs, "no such runtime schedule") {
		t.Fatalf("delete again: %d %q", code, errs)
	}
}

// "baton schedules" alone, or with an unknown subcommand, is a usage
// error; each subcommand has its help.
func TestSchedulesUsage(t *testing.T) {
	t.Parallel()
	if code, _, errs := runIn("schedules"); code != 2 || !strings.Contains(errs, "name what to do") {
		t.Fatalf("schedules: %d %q", code, errs)
	}
	if code, _, errs := runIn("schedules", "frob"); code != 2 || !strings.Contains(errs, `unknown subcommand "frob"`) {
		t.Fatalf("schedules frob: %d %q", code, errs)
	}
	if code, out, _ := runIn("help", "schedules", "put"); code != 0 || !strings.Contains(out, "--if-version") || !strings.Contains(out, "--http-url") {
		t.Fatalf("help schedules put: %d %q", code, out)
	}
	if code, out, _ := runIn("schedules", "list", "--help"); code != 0 || !strings.Contains(out, "--prefix") {
		t.Fatalf("schedules list --help: %d %q", code, out)
	}
	if code, _, errs := runIn("schedules", "get", "--nxt", "3", "x"); code != 2 || !strings.Contains(errs, "baton schedules get: unknown flag --nxt for baton schedules get; did you mean --next?") ||
		!strings.Contains(errs, "usage: baton schedules get") {
		t.Fatalf("a typo: %d %q", code, errs)
	}
}

// A put no live replica can run fails, naming the handler meant; --force
// puts it, and put, get and list say it waits.
func TestSchedulesPutNoLiveReplicaCanRunNeedsForce(t *testing.T) {
	t.Parallel()
	path := schedulesConfigFile(t, redistest.New(t))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	reg.Register("tenant-report", jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil }))
	r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	poll.Require(t, 20*time.Second, "the replica live in the roster", func() bool {
		st, err := c.Status(context.Background())
		return err == nil && len(st.Replicas) == 1 && st.Replicas[0].Live
	})
	put := []string{"schedules", "put", "--config", path, "report/tenant-44", "--schedule", "@hourly", "--handler", "tenant-reprot"}
	if code, out, errs := runIn(put...); code != 1 || out != "" || !strings.Contains(errs, `no live replica registers Go handler "tenant-reprot" (did you mean "tenant-report"?)`) ||
		!strings.Contains(errs, "--force") {
		t.Fatalf("put of a mistyped handler: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn(append(put, "--force")...); code != 0 || !strings.Contains(out, `waiting: no live replica registers Go handler "tenant-reprot"`) {
		t.Fatalf("put --force: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "get", "--config", path, "report/tenant-44"); code != 0 || !strings.Contains(out, "WAITING:    no live replica registers") {
		t.Fatalf("get: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "list", "--config", path); code != 0 || !strings.Contains(out, "PROBLEM") || !strings.Contains(out, "waiting: no live replica") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
}

// export writes every schedule as JSON Lines to a file only its owner
// reads; import puts them back on another Redis, after checking every
// line: one bad line puts nothing.
func TestSchedulesExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	fromSrv := redistest.New(t)
	from := schedulesConfigFile(t, fromSrv)
	for i := range 3 {
		if code, out, errs := runIn("schedules", "put", "--config", from, fmt.Sprintf("report/tenant-%d", i), "--schedule", "0 9 * * 1",
			"--timezone", "Europe/Berlin", "--http-url", "https://hooks.example/tenants/1/report", "--http-header", "Authorization: Bearer s3cr3t"); code != 0 {
			t.Fatalf("put: %d %q %q", code, out, errs)
		}
	}
	dump := filepath.Join(t.TempDir(), "schedules.jsonl")
	if code, out, errs := runIn("schedules", "export", "--config", from); code != 2 || !strings.Contains(errs, "-o FILE") {
		t.Fatalf("export without -o: %d %q %q", code, out, errs)
	}
	code, out, errs := runIn("schedules", "export", "--config", from, "-o", dump)
	if code != 0 || !strings.Contains(errs, "3 runtime schedules exported") || strings.Contains(out+errs, "s3cr3t") {
		t.Fatalf("export: %d %q %q", code, out, errs)
	}
	fi, err := os.Stat(dump)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the export file: %v %v, want mode 0600", fi, err)
	}
	b, _ := os.ReadFile(dump)
	if n := strings.Count(string(b), "\n"); n != 3 || !strings.Contains(string(b), "s3cr3t") {
		t.Fatalf("the export holds %d lines:\n%s", n, b)
	}

	// a schedule that cannot be read is left out, said, and the export
	// exits 1 with what it could write
	rdb := fromSrv.TestClient(t)
	if err := rdb.HSet(context.Background(), "stest:{schedules}:defs", "report/tenant-9", "not a record").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.ZAdd(context.Background(), "stest:{schedules}:ids", redis.Z{Member: "report/tenant-9"})
	// over the earlier whole export: it stays, the partial one goes beside
	if code, out, errs := runIn("schedules", "export", "--config", from, "-o", dump); code != 1 ||
		!strings.Contains(errs, "report/tenant-9 left out") || !strings.Contains(errs, "3 runtime schedules exported to "+dump+".partial, 1 left out") {
		t.Fatalf("export with an unreadable schedule: %d %q %q", code, out, errs)
	}
	if p, _ := os.ReadFile(dump + ".partial"); strings.Count(string(p), "\n") != 3 {
		t.Fatalf("the partial export holds:\n%s", p)
	}
	if kept, _ := os.ReadFile(dump); string(kept) != string(b) {
		t.Fatalf("the earlier whole export was replaced:\n%s", kept)
	}

	to := schedulesConfigFile(t, redistest.New(t))
	broken := filepath.Join(t.TempDir(), "broken.jsonl")
	if err := writeFile(broken, string(b)+`{"id": "x", "definition": {"schedule": "61 * * * *", "handler": {"name": "h"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("schedules", "import", "--config", to, "-f", broken); code != 2 || !strings.Contains(errs, broken+":4: x:") || !strings.Contains(errs, "nothing was put") {
		t.Fatalf("import of a broken export: %d %q %q", code, out, errs)
	}
	if _, out, _ := runIn("schedules", "list", "--config", to); !strings.Contains(out, "no runtime schedules") {
		t.Fatalf("a refused import put something: %q", out)
	}
	if code, out, errs := runIn("schedules", "import", "--config", to, "-f", dump); code != 0 || !strings.Contains(out, "3 runtime schedules put") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	_, before, _ := runIn("schedules", "get", "--config", from, "--json", "report/tenant-1")
	_, after, _ := runIn("schedules", "get", "--config", to, "--json", "report/tenant-1")
	var a, z baton.Schedule
	if json.Unmarshal([]byte(before), &a) != nil || json.Unmarshal([]byte(after), &z) != nil || string(a.Definition) != string(z.Definition) {
		t.Fatalf("imported definition %s, exported %s", z.Definition, a.Definition)
	}
}

// An export holding one id on two lines is refused whole, naming both
// lines: which definition to put back is not for import to guess.
func TestSchedulesImportRefusesAnIDOnTwoLines(t *testing.T) {
	t.Parallel()
	to := schedulesConfigFile(t, redistest.New(t))
	dup := filepath.Join(t.TempDir(), "dup.jsonl")
	line := func(s string) string {
		return `{"id": "x", "definition": {"schedule": "` + s + `", "handler": {"name": "h"}}}` + "\n"
	}
	if err := writeFile(dup, line("@hourly")+line("@daily")); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("schedules", "import", "--config", to, "--force", "-f", dup); code != 2 || !strings.Contains(errs, dup+":2: x: also on line 1") {
		t.Fatalf("import of an id on two lines: %d %q %q", code, out, errs)
	}
	if _, out, _ := runIn("schedules", "list", "--config", to); !strings.Contains(out, "no runtime schedules") {
		t.Fatalf("a refused import put something: %q", out)
	}
}

// A put without what to run offers what a runtime schedule takes (no
// command); a flag error's usage shows both forms of put.
func TestSchedulesPutErrorsOfferWhatItTakes(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	code, _, errs := runIn("schedules", "put", "--config", cfg, "x", "--schedule", "@hourly")
	if code != 2 || !strings.Contains(errs, "set one of handler") || strings.Contains(errs, "exec") {
		t.Fatalf("a put without what to run: %d %q", code, errs)
	}
	code, _, errs = runIn("schedules", "put", "--config", cfg, "x", "--bogus")
	if code != 2 || !strings.Contains(errs, "usage: baton schedules put [--config FILE] [--if-version N|--if-match ETAG] [--force] ID -f FILE\n       baton schedules put") {
		t.Fatalf("a flag error's usage: %d %q", code, errs)
	}
}

// An export of schedules naming a calendar put at runtime carries what an
// import needs to put them back on another Redis (a Redis lost for good):
// the import puts the calendars, then the schedules, each after the
// parents it runs after, and they keep their calendar's days.
func TestSchedulesExportImportKeepsTheRuntimeCalendarsTheyName(t *testing.T) {
	from := schedulesConfigFile(t, redistest.New(t))
	if code, out, errs := runIn("calendars", "put", "--config", from, "holidays", "--date", "2026-12-25"); code != 0 {
		t.Fatalf("calendars put: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "put", "--config", from, "report/a", "--schedule", "0 9 * * *", "--handler", "report", "--force", "--exclude", "holidays"); code != 0 {
		t.Fatalf("schedules put: %d %q %q", code, out, errs)
	}
	// a chain whose child's id sorts before its parent's: put after it
	parent := filepath.Join(t.TempDir(), "child.yaml")
	if err := writeFile(parent, "after: [\"@z-parent\"]\nhandler: {name: report}\n"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("schedules", "put", "--config", from, "z-parent", "--schedule", "0 9 * * *", "--handler", "report", "--force"); code != 0 {
		t.Fatalf("schedules put: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "put", "--config", from, "a-child", "-f", parent, "--force"); code != 0 {
		t.Fatalf("schedules put: %d %q %q", code, out, errs)
	}
	dump := filepath.Join(t.TempDir(), "schedules.jsonl")
	if code, out, errs := runIn("schedules", "export", "--config", from, "-o", dump); code != 0 {
		t.Fatalf("export: %d %q %q", code, out, errs)
	}
	to := schedulesConfigFile(t, redistest.New(t))
	if code, out, errs := runIn("schedules", "import", "--config", to, "-f", dump); code != 0 {
		b, _ := os.ReadFile(dump)
		t.Fatalf("import of the export: %d %q %q\nexport:\n%s", code, out, errs, b)
	}
	if code, out, errs := runIn("calendars", "get", "--config", to, "holidays"); code != 0 || !strings.Contains(out, "2026-12-25") {
		t.Fatalf("the calendar after the import: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("schedules", "get", "--config", to, "a-child"); code != 0 || strings.Contains(out, "REFUSED") {
		t.Fatalf("the chained schedule after the import: %d %q %q", code, out, errs)
	}
}
