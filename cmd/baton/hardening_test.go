package main

// Secrets in logs and errors, baton lock --config, and what a job can read
// of baton.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// Secrets with characters that logs escape (& < > " \\ and newlines) are
// masked in JSON and console lines: masking happens before escaping.
func TestLogMaskCoversEscapedForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, secret, format string
		log                  func(secret string) []any
	}{
		{"json, & and quote", `p&ss"word-42`, logFormatJSON, func(s string) []any { return []any{"err", errors.New("auth " + s)} }},
		{"json, < and backslash", `a<b\cdef-42`, logFormatJSON, func(s string) []any { return []any{"err", errors.New("auth " + s)} }},
		{"console, & and quote", `p&ss"word-42`, logFormatConsole, func(s string) []any { return []any{"err", errors.New("auth " + s)} }},
		{"json, quote in a multi-line error", `pa"ss-word-42`, logFormatJSON, func(s string) []any {
			return []any{"err", errors.Join(errors.New("first"), errors.New("auth "+s))}
		}},
		{"json, backslash in a multi-line string", `pa\ss-word-42`, logFormatJSON, func(s string) []any {
			return []any{"output_tail", "line 1\nauth " + s}
		}},
	} {
		var buf bytes.Buffer
		log := newSlog(newZerolog(&buf, tc.format, zerolog.InfoLevel), []string{tc.secret})
		log.Error("run failed", tc.log(tc.secret)...)
		line := buf.String()
		// the secret with only its quote and backslash escaped (once or
		// twice): what a reader of the log recovers at a glance
		unesc := strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(line))
		if strings.Contains(line, tc.secret) || strings.Contains(unesc, tc.secret) {
			t.Errorf("%s: the secret %s is readable in the log line: %s", tc.name, tc.secret, line)
		}
	}
}

// An exec command from ${VAR} that is not found: the run error quotes it
// (%q, nested), and the secret is masked in every form.
func TestQuotedSecretInARunErrorMasked(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const secret = `tool"x-9b2f61d4`
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: leak
    schedule: "@every 1s"
    max_retry: 0
    exec:
      command: ["${BATON_R9_TOOL}"]
`, redisURL(srv))); err != nil {
		t.Fatal(err)
	}
	p := start(t, []string{"BATON_R9_TOOL=" + secret}, "run", "--config", cfg, "--id", "r9", "--log-format", "json")
	waitRunning(t, 20*time.Second, "a failed run", func() bool { return strings.Contains(p.stderr.String(), "run failed") }, p)
	signalAndWait(t, p, syscall.SIGTERM, 0)
	logs := p.stderr.String()
	if i := strings.Index(logs, "9b2f61d4"); i >= 0 {
		t.Errorf("the secret %s is in the log: ...%s...", secret, logs[max(0, i-120):min(len(logs), i+40)])
	}
}

// baton lock --config reads only the redis, locking and namespace sections: a
// crontab whose environment lacks the jobs' ${VAR}s still works.
func TestLockConfigNeedsOnlyItsSections(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
jobs:
  - name: hook
    schedule: "@every 1m"
    http:
      url: http://127.0.0.1:1/hook
      headers: {Authorization: "Bearer ${BATON_R9_UNSET_TOKEN}"}
`, redisURL(srv))); err != nil {
		t.Fatal(err)
	}
	code, errs := runBaton(t, 15*time.Second, nil, "lock", "--config", cfg, "k-r9", "--", "true")
	if code != 0 {
		t.Errorf("baton lock --config with a job's ${VAR} unset in the crontab's environment: exit %d: %s", code, errs)
	}
}

// baton is not dumpable: a job running as baton's (unprivileged) user cannot
// read /proc/<baton>/environ, where a signing key or a Redis password may be.
func TestJobCannotReadBatonsEnvironment(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run baton as nobody")
	}
	srv := redistest.New(t)
	dir, err := os.MkdirTemp("", "r9env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := placeBinary(t, filepath.Join(dir, "baton"))
	out := filepath.Join(dir, "out")
	cfg := filepath.Join(dir, "baton.yaml")
	script := `sup=$PPID; baton=$(cut -d" " -f4 /proc/$sup/stat); tr "\\0" "\\n" < /proc/$baton/environ | grep BATON_R9_ >> ` + out
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: peek
    schedule: "@every 1s"
    exec:
      command: ["sh", "-c", %q]
`, redisURL(srv), script)), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd := exec.Command(bin, "run", "--config", cfg, "--id", "r9env")
	cmd.Env = append(os.Environ(), "BATON_R9_SIGNING_KEY=k-0123456789abcdef0123456789abcdef", "HOME="+dir)
	cmd.Stderr = &stderr
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// the job wrote what it read, or ran often enough to have: the checks below tell which
	poll.Until(15*time.Second, func() bool {
		return waitFileOrEmpty(out) != "" || strings.Count(stderr.String(), `"job":"peek"`) >= 4
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	got := waitFileOrEmpty(out)
	if !strings.Contains(stderr.String(), "peek") {
		t.Fatalf("no run of peek seen:\n%s", stderr.String())
	}
	if strings.Contains(got, "k-0123456789abcdef") {
		t.Errorf("a job of baton's user read baton's environment through /proc: %s", strings.TrimSpace(got))
	}
}

// placeBinary puts the baton binary at path, where nobody may run it: a hard
// link, as nothing is written then. A copy is the fallback (another file
// system): a binary just written is "text file busy" (ETXTBSY) while a child
// that another test's goroutine forked meanwhile holds the write descriptor,
// until it execs.
func placeBinary(t *testing.T, path string) string {
	t.Helper()
	if err := os.Link(batonBin, path); err == nil {
		return path
	}
	b, err := os.ReadFile(batonBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitFileOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// A ${VAR} value that looks like a number, a flag or a level is masked in
// strings only: every line stays valid JSON with its level.
func TestLogMaskKeepsJSONValid(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"8080", "true", "error"} {
		var buf bytes.Buffer
		log := newSlog(newZerolog(&buf, logFormatJSON, zerolog.InfoLevel), []string{secret})
		log.Error("run failed", "job", "hook", "fence", int64(1763018080123), "manual", true)
		line := buf.String()
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("secret %q: the log line is not JSON any more (%v): %s", secret, err, line)
		} else if m["level"] != "error" {
			t.Errorf("secret %q: the line's level is %v: %s", secret, m["level"], line)
		}
	}
}
