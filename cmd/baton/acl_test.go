package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// documentedACL returns the README's ACL SETUSER line for namespace ns and
// password, split into arguments.
func documentedACL(t *testing.T, ns, password string) []any {
	t.Helper()
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "ACL SETUSER baton ") {
			line = strings.ReplaceAll(line, "NS", ns)
			line = strings.ReplaceAll(line, "PASSWORD", password)
			var args []any
			for _, f := range strings.Fields(line) {
				args = append(args, f)
			}
			return args
		}
	}
	t.Fatal("README.md has no line starting with \"ACL SETUSER baton \"")
	return nil
}

// baton runs under exactly the Redis ACL the README documents: every kind
// of job runs (cron forbid, replace and allow, local on the leader, a
// singleton), and status, pause, resume and lock work; Redis denied nothing
// but CONFIG GET (left out on purpose). A user of another namespace can
// read nothing of this one's.
func TestRunsUnderTheDocumentedACL(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	admin := srv.TestClient(t)
	ctx := context.Background()
	const pass = "acl-pw-5e1f0c"
	for _, ns := range []string{"prod", "staging"} {
		args := documentedACL(t, ns, pass)
		args[2] = "baton-" + ns // the README's user, one per namespace here
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "ticks")
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: redis://baton-prod:%s@%s/0
locking:
  fresh_deployment: true
namespace: prod
security:
  signing_keys: ["0123456789abcdef0123456789abcdef-acl"]
jobs:
  - name: report
    schedule: "@every 1s"
    exec: {command: %s}
  - name: rep
    schedule: "@every 1s"
    concurrency: replace
    exec: {command: %s}
  - name: par
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: %s}
  - name: loc
    schedule: "@every 1s"
    mode: local
    leader: true
    exec: {command: %s}
  - name: single
    mode: singleton
    exec: {command: ["sh", "-c", "echo single >> %s; sleep 100"]}
`, pass, srv.Addr(), tickCommand(out), tickCommand(out), tickCommand(out), tickCommand(out), out)); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "run", "--config", cfg, "--id", "acl-1")
	waitRunning(t, 30*time.Second, "every kind of job runs", func() bool {
		seen := map[string]int{}
		for _, l := range readTicks(t, out) {
			seen[l.job]++
		}
		b, _ := os.ReadFile(out)
		return seen["report"] >= 2 && seen["rep"] >= 2 && seen["par"] >= 2 && seen["loc"] >= 2 && strings.Contains(string(b), "single\n")
	}, p)
	for _, args := range [][]string{
		{"status", "--config", cfg},
		{"pause", "--config", cfg, "report"},
		{"resume", "--config", cfg, "report"},
		{"lock", "--config", cfg, "--fresh-deployment", "acl-lock", "--", "true"},
	} {
		cmd := exec.Command(batonBin, args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("baton %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	signalAndWait(t, p, syscall.SIGTERM, 0)
	if logs := p.stderr.String(); strings.Contains(logs, "NOPERM") && strings.Count(logs, "NOPERM") != strings.Count(logs, "'config|get'") {
		t.Errorf("baton was denied something:\n%s", logs)
	}

	entries, err := admin.Do(ctx, "ACL", "LOG", "128").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fields := map[string]any{}
		if kv, ok := e.([]any); ok {
			for i := 0; i+1 < len(kv); i += 2 {
				fields[fmt.Sprint(kv[i])] = kv[i+1]
			}
		} else if m, ok := e.(map[any]any); ok {
			for k, v := range m {
				fields[fmt.Sprint(k)] = v
			}
		}
		if fields["object"] != "config|get" {
			t.Errorf("Redis denied baton: %v", fields)
		}
	}
	if len(entries) == 0 {
		t.Error("the ACL log is empty: the lock client's CONFIG GET should have been denied (is the log read right?)")
	}

	// the staging user sees nothing of prod
	staging := srv.TestClient(t, func(o *redis.Options) { o.Username, o.Password = "baton-staging", pass })
	for _, key := range []string{"prod:{report}:mark", "asynq:{prod:default}:completed", "{prod:roster}"} {
		if err := staging.Exists(ctx, key).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("staging user reads %s: %v", key, err)
		}
	}
}

// A Redis user whose ACL predates runtime schedules (no &NS:cancel:@*)
// still runs baton: its workers warn that the runtime schedules' stop and
// replace requests do not reach them, and every job runs.
func TestRunsUnderAnACLWithoutTheStopPatternAndWarns(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	admin := srv.TestClient(t)
	ctx := context.Background()
	const pass = "acl-pw-7a2e19"
	var args []any
	for _, a := range documentedACL(t, "prod", pass) {
		if a != "&prod:cancel:@*" {
			args = append(args, a)
		}
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "ticks")
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: redis://baton:%s@%s/0
locking:
  fresh_deployment: true
namespace: prod
jobs:
  - name: report
    schedule: "@every 1s"
    exec: {command: %s}
`, pass, srv.Addr(), tickCommand(out))); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "run", "--config", cfg, "--id", "acl-old")
	waitRunning(t, 30*time.Second, "the job runs", func() bool { return len(readTicks(t, out)) >= 2 }, p)
	if !strings.Contains(p.stderr.String(), "may not PSUBSCRIBE prod:cancel:@*") {
		t.Fatalf("no warning about the missing pattern; stderr:\n%s", p.stderr.String())
	}
}
