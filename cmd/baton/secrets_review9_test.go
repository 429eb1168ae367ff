package main

// Review 9: masking gaps and baton lock --config. A test that fails
// demonstrates a bug.

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

	"github.com/batonhq/baton/internal/redistest"
)

// The log filter masks a secret "as it is and as JSON escapes it", but the
// JSON it sees is zerolog's, not encoding/json's: json.Marshal escapes & < >
// (as \u0026 \u003c \u003e), zerolog does not. A secret with one of & < >
// and one of " \ (a generated password) is written by zerolog as
// p&ss\"w..., which is neither form: it leaks in every log line that holds
// it, in both formats. And a string attribute that holds a control
// character (a multi-line error: errors.Join, an exec error) is escaped
// twice (redact.Escape, then zerolog), so a secret with " or \ in it
// leaks there even without & < >.
func TestLogMaskMissesZerologEscapes_review9(t *testing.T) {
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

// The same end to end: an exec job whose command comes from ${VAR} and is
// not found. exec quotes the name (%q), the supervisor's client quotes it
// again; maskedError looks for the raw value only, so a secret with a "
// reaches the log.
func TestCommandFromSecretLeaksWhenQuoted_review9(t *testing.T) {
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

// baton lock --config used to read only redis, locking and namespace; it
// now loads and validates the whole file, ${VAR}s included. A crontab line
// (cron's environment is nearly empty) that shares the replicas' config,
// whose jobs take a secret from ${API_TOKEN}, stops working on upgrade:
// exit 2, "environment variable API_TOKEN is not set". (Documented in the
// README, so a compatibility note rather than a bug; kept as a test since
// the upgrade breaks working crontabs silently: cron mails the error.)
func TestLockConfigNeedsEveryJobsVariable_review9(t *testing.T) {
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

// The child's environment is an allowlist so that "a job gets only what it
// is given" (REDISCLI_AUTH, a signing key in BATON_SIGNING_KEY, cloud
// keys). But the job runs as baton's user and baton stays dumpable: the
// job reads /proc/<baton>/environ (its supervisor's parent) and has all of
// it. baton runs as an unprivileged user here (nobody), as in production;
// prctl(PR_SET_DUMPABLE, 0) in baton would close this.
func TestJobReadsBatonsEnvironmentThroughProc_review9(t *testing.T) {
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
	bin := filepath.Join(dir, "baton")
	b, err := os.ReadFile(batonBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
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
	deadline := time.Now().Add(15 * time.Second)
	for waitFileOrEmpty(out) == "" && strings.Count(stderr.String(), `"job":"peek"`) < 4 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
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

func waitFileOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// The log filter replaces every secret of 4 bytes or more anywhere in the
// JSON line, structure included. A config value from the environment that
// is a number or a flag - url: http://127.0.0.1:${PORT}/hook with
// PORT=8080, env: {VERBOSE: "${VERBOSE}"} with VERBOSE=true - turns
// "fence":1763018080123 into "fence":176301xxxxx123 and true into xxxxx:
// the line is no longer JSON, and log shippers drop or mangle it (and a
// secret "info" or "error" rewrites every line's level).
func TestLogMaskBreaksJSONLines_review9(t *testing.T) {
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
