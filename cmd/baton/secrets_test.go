package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// A secret that came from ${VAR} appears in no log line of a running
// replica, whatever printed it: the effective config at debug level, a
// failed run's error (its argv, its URL) and output tail, asynq's own logs.
func TestSecretsStayOutOfTheLogs(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const token = "tok-9b2f61d4e0"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: leak
    schedule: "@every 1s"
    max_retry: 0
    exec:
      command: ["sh", "-c", "echo \"my token is $0\"; echo \"quoted: \\\"$0\\\"\" >&2; exit 3", "${BATON_TEST_TOKEN}"]
  - name: hook
    schedule: "@every 1s"
    max_retry: 0
    http:
      url: "http://127.0.0.1:1/hook?key=${BATON_TEST_TOKEN}"
`, redisURL(srv))); err != nil {
		t.Fatal(err)
	}
	env := []string{"BATON_TEST_TOKEN=" + token}
	for _, format := range []string{"json", "console"} {
		p := start(t, env, "run", "--config", cfg, "--id", "r-"+format, "--log-level", "debug", "--log-format", format)
		waitRunning(t, 20*time.Second, "both jobs failing", func() bool {
			s := p.stderr.String()
			return strings.Count(s, "run failed") >= 2 && strings.Contains(s, "127.0.0.1:1/hook")
		}, p)
		signalAndWait(t, p, syscall.SIGTERM, 0)
		logs := p.stderr.String()
		if strings.Contains(logs, token) {
			i := strings.Index(logs, token)
			t.Errorf("%s logs show the secret: ...%s...", format, logs[max(0, i-200):min(len(logs), i+100)])
		}
		if !strings.Contains(logs, "xxxxx") {
			t.Errorf("%s logs mask nothing; the test no longer exercises masking:\n%s", format, logs)
		}
		// run errors name scheme://host/path; only the printed config shows
		// the query, its secret masked
		if strings.Count(logs, "key=") != strings.Count(logs, "key=xxxxx") || strings.Count(logs, "key=") > 1 {
			i := strings.Index(logs, "key=")
			t.Errorf("%s logs show an http job's query: ...%s...", format, logs[max(0, i-300):min(len(logs), i+100)])
		}
	}

	// baton validate --print
	cmd := exec.Command(batonBin, "validate", "--config", cfg, "--print")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), token) || !strings.Contains(string(out), "hook?key=xxxxx") {
		t.Errorf("validate --print: %v, output:\n%s", err, out)
	}
}

// Values read from Redis are printed with control characters escaped: a
// writer to Redis cannot drive the operator's terminal through baton status.
func TestStatusEscapesValuesFromRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf("redis:\n  url: %s\nlocking:\n  fresh_deployment: true\njobs:\n  - name: a\n    schedule: '@hourly'\n    exec: {command: [\"true\"]}\n", redisURL(srv))); err != nil {
		t.Fatal(err)
	}
	// a forged roster entry: its id and version carry a terminal escape
	evil := "r1\x1b[2J\x1b]0;pwned\a"
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	member, _ := json.Marshal(map[string]any{"version": "v\x1b[31m", "role": "run", "queues": []string{"baton:default\x1b[0m"}, "hash": "h\x1b[1m"})
	list, _ := json.Marshal(map[string]string{"a\x1b[1m": "cron baton:default d"})
	if err := rdb.HSet(ctx, "{baton:roster}", evil, fmt.Sprintf("%d %s", now.UnixMilli(), member)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "{baton:roster}:lists", "h\x1b[1m", string(list)).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	if strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("status printed raw control characters:\n%q", out)
	}
	for _, want := range []string{`r1\x1b[2J\x1b]0;pwned\a`, `v\x1b[31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %s:\n%s", want, out)
		}
	}
}

// baton lock reads a password from a file or $REDISCLI_AUTH, so it need not
// be in a URL that ps shows; --config expands ${VAR} like every command.
func TestLockPasswordOutsideTheURL(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const pass = "pw-c0ffee-42"
	if err := srv.TestClient(t).ConfigSet(context.Background(), "requirepass", pass).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := redisURL(srv)
	initMasters(t, nil, []string{"--redis", url, "--redis-password-file", pwFile})
	// no password: refused by the server, exit 69, nothing leaked
	code, errs := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "k", "--", "true")
	if code != exitUnavailable || !strings.Contains(errs, "NOAUTH") && !strings.Contains(errs, "auth") {
		t.Errorf("no password: exit %d, %s", code, errs)
	}
	for name, tc := range map[string]struct {
		env  []string
		args []string
	}{
		"file":          {nil, []string{"--redis", url, "--redis-password-file", pwFile}},
		"REDISCLI_AUTH": {[]string{"REDISCLI_AUTH=" + pass}, []string{"--redis", url}},
		"config":        {[]string{"BATON_TEST_PW=" + pass}, []string{"--config", writeTemp(t, dir, fmt.Sprintf("redis:\n  url: redis://:${BATON_TEST_PW}@%s/0\njobs: []\n", srv.Addr()))}},
	} {
		args := append([]string{"lock"}, tc.args...)
		args = append(args, "k-"+strings.ToLower(name), "--", "sh", "-c", "echo ran")
		cmd := exec.Command(batonBin, args...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ran" {
			t.Errorf("%s: %v: %s", name, err, out)
		}
	}
	// a wrong password from the file: the message names the source, not the password
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("wrong-password-77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, errs = runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--redis-password-file", bad, "k", "--", "true")
	if code != exitUnavailable || strings.Contains(errs, "wrong-password-77") {
		t.Errorf("wrong password: exit %d, %s", code, errs)
	}
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing"), "--redis-password-file: open "},
		{writeTemp(t, dir, "\n"), "the first line is empty"},
	} {
		code, errs := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--redis-password-file", tc.file, "k", "--", "true")
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("--redis-password-file %s: exit %d, %s; want %q", tc.file, code, errs, tc.want)
		}
	}
}

// writeTemp writes content to a new file in dir and returns its path.
func writeTemp(t *testing.T, dir, content string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
