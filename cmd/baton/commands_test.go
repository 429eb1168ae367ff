package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// writeConfig writes a config file into a temp dir and returns its path.
func writeConfig(t *testing.T, yml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.yaml")
	if err := writeFile(path, yml); err != nil {
		t.Fatal(err)
	}
	return path
}

// runIn runs the command line in-process.
func runIn(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

const twoJobs = `redis:
  url: redis://127.0.0.1:1/0
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
  - name: b
    schedule: "0 3 * * *"
    timezone: Europe/Berlin
    http: {url: "https://example.com/hook"}
`

func TestValidate(t *testing.T) {
	t.Parallel()
	good := writeConfig(t, twoJobs)
	bad := writeConfig(t, `redis:
  url: redis://127.0.0.1:1/0
jobs:
  - name: a
    schedule: "61 * * * *"
    exec: {command: ["true"]}
  - name: b
    schedule: "@every 1m"
    exce: {command: ["true"]}
`)
	if code, out, errs := runIn("validate", good); code != 0 || out != "ok: 2 jobs\n" || errs != "" {
		t.Errorf("validate good: %d %q %q", code, out, errs)
	}
	if code, out, _ := runIn("validate", "--config", good, "--print"); code != 0 || !strings.Contains(out, "namespace: baton") || !strings.HasSuffix(out, "ok: 2 jobs\n") {
		t.Errorf("validate --print: %d %q", code, out)
	}
	if code, out, _ := runIn("validate", "../../config.example.yaml"); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Errorf("validate config.example.yaml: %d %q", code, out)
	}

	code, out, errs := runIn("validate", bad)
	if code != 1 || out != "" {
		t.Fatalf("validate bad: exit %d stdout %q, want 1", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:(\d+): job "(a|b)": `)
	var got []string
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("error line %q does not name file:line and job", l)
			continue
		}
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != "5,7,9" {
		t.Errorf("error lines at %v, want 5, 7 and 9; stderr:\n%s", got, errs)
	}

	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if code, _, errs := runIn("validate", missing); code != 1 || !strings.Contains(errs, missing) || strings.Count(errs, "\n") != 1 {
		t.Errorf("validate missing: %d %q", code, errs)
	}
	if code, _, errs := runIn("validate", "--frob"); code != exitUsage || !strings.Contains(errs, "frob") {
		t.Errorf("validate --frob: %d %q", code, errs)
	}
	if code, _, errs := runIn("validate", good, "extra"); code != exitUsage || !strings.Contains(errs, `"extra"`) {
		t.Errorf("validate two files: %d %q", code, errs)
	}
}

const berlinJobs = `redis:
  url: redis://127.0.0.1:1/0
timezone: Europe/Berlin
jobs:
  - name: digest
    schedule: "30 2 * * *"
    exec: {command: ["true"]}
    paused: true
  - name: hourly
    schedule: "0 * * * *"
    exec: {command: ["true"]}
  - name: utc
    schedule: "@every 90s"
    timezone: UTC
    exec: {command: ["true"]}
`

func TestNextAcrossDST(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, berlinJobs)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{ // a fixed-time job: the skipped 02:30 runs at the jump to 03:00
			[]string{"--job", "digest", "-n", "3", "--from", "2026-03-28T00:00:00+01:00"},
			`digest: "30 2 * * *" in Europe/Berlin (paused in config)
  2026-03-28T02:30:00+01:00
  2026-03-29T03:00:00+02:00  (DST: UTC+1 -> UTC+2; 02:30 skipped by the clock change: run at the jump)
  2026-03-30T02:30:00+02:00
`,
		},
		{ // a wildcard job follows absolute time: no 02:00 that day
			[]string{"--job", "hourly", "-n", "3", "--from", "2026-03-29T00:30:00Z"},
			`hourly: "0 * * * *" in Europe/Berlin
  not run: 2026-03-29 02:00  (skipped by the clock change; dst: vixie)
  2026-03-29T03:00:00+02:00  (DST: UTC+1 -> UTC+2)
  2026-03-29T04:00:00+02:00
  2026-03-29T05:00:00+02:00
`,
		},
		{ // autumn: the repeated hour fires twice for a wildcard job
			[]string{"--job", "hourly", "-n", "4", "--from", "2026-10-25T00:30:00+02:00"},
			`hourly: "0 * * * *" in Europe/Berlin
  2026-10-25T01:00:00+02:00
  2026-10-25T02:00:00+02:00  (repeated hour, first copy)
  2026-10-25T02:00:00+01:00  (DST: UTC+2 -> UTC+1; repeated hour, second copy)
  2026-10-25T03:00:00+01:00
`,
		},
		{
			[]string{"-n", "1", "--from", "2026-03-29T00:30:00Z"},
			`digest: "30 2 * * *" in Europe/Berlin (paused in config)
  2026-03-29T03:00:00+02:00  (DST: UTC+1 -> UTC+2; 02:30 skipped by the clock change: run at the jump)

hourly: "0 * * * *" in Europe/Berlin
  not run: 2026-03-29 02:00  (skipped by the clock change; dst: vixie)
  2026-03-29T03:00:00+02:00  (DST: UTC+1 -> UTC+2)

utc: "@every 90s" in UTC
  2026-03-29T00:31:30Z
`,
		},
	} {
		code, out, errs := runIn(append([]string{"next", "--config", cfg}, tc.args...)...)
		if code != 0 || out != tc.want {
			t.Errorf("next %v: exit %d, stderr %q\n got:\n%s\nwant:\n%s", tc.args, code, errs, out, tc.want)
		}
	}
	// a one-shot job: its tick, then none; a max_runs job says it stops
	shot := writeConfig(t, `redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - name: once
    at: "2027-01-09T02:00:00+01:00"
    exec: {command: ["true"]}
  - name: thrice
    schedule: "@daily"
    max_runs: 3
    exec: {command: ["true"]}
`)
	code, out, errs := runIn("next", "--config", shot, "-n", "2", "--from", "2026-12-31T00:00:00Z")
	want := `once: one-shot at 2027-01-09T02:00:00+01:00
  2027-01-09T01:00:00Z
  (no more ticks)

thrice: "@daily" in UTC (max_runs 3: stops after that many dispatched ticks, see baton status)
  2027-01-01T00:00:00Z
  2027-01-02T00:00:00Z
`
	if code != 0 || out != want {
		t.Errorf("next one-shot: exit %d, stderr %q\n got:\n%s\nwant:\n%s", code, errs, out, want)
	}
	// the default is 5 ticks from now
	code, out, _ = runIn("next", "--config", cfg, "--job", "utc")
	if n := strings.Count(out, "\n  20"); code != 0 || n != 5 {
		t.Errorf("next default: exit %d, %d ticks:\n%s", code, n, out)
	}
}

func TestCommandUsageErrors(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, twoJobs)
	bad := writeConfig(t, "redis:\n  url: redis://127.0.0.1:1/0\njobs:\n  - name: x\n    schedule: nope\n    exec: {command: [\"true\"]}\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--frob"}, "unknown flag --frob for baton run; its flags are --config, --http, --id, --log-format, --log-level\nusage: baton run [flags]\n"},
		{[]string{"scheduler", "--config", cfg, "extra"}, `unexpected argument "extra"`},
		{[]string{"worker", "--config", cfg, "--log-format", "xml"}, `--log-format: unknown log format "xml"`},
		{[]string{"run", "--config", cfg, "--log-level", "loud"}, `--log-level: unknown log level "loud"`},
		{[]string{"run", "--config", missing}, missing + " (--config) does not exist"},
		{[]string{"run", "--config", bad}, bad + ":5: job \"x\": schedule: "},
		{[]string{"run", "--config", cfg, "--http", "8080"}, `--http: listen address "8080": want host:port`},
		{[]string{"dev", "--config", cfg, "--replicas", "0"}, "--replicas 0"},
		{[]string{"next", "--config", cfg, "-n", "0"}, "-n 0: want 1..1000"},
		{[]string{"next", "--config", cfg, "--from", "yesterday"}, `--from "yesterday": want an RFC 3339 time`},
		{[]string{"next", "--config", cfg, "--job", "zzz"}, `--job "zzz": no such job in ` + cfg},
		{[]string{"next", "--config", bad}, bad + ":5: "},
	} {
		code, _, errs := runIn(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
	for _, cmd := range []string{"run", "scheduler", "worker", "dev", "validate", "next"} {
		if code, out, _ := runIn("help", cmd); code != 0 || !strings.Contains(out, "usage: baton "+cmd) {
			t.Errorf("help %s: exit %d, %q", cmd, code, out)
		}
	}
	_, out, _ := runIn("help")
	for _, cmd := range []string{"run", "scheduler", "worker", "dev", "validate", "next", "lock", "version"} {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("usage does not list %s:\n%s", cmd, out)
		}
	}
}

func TestEnvFlags(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, twoJobs)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string // in stderr, or stdout when code is 0
	}{
		{[]string{"BATON_CONFIG=" + cfg}, []string{"validate"}, 0, "ok: 2 jobs"},
		{[]string{"BATON_CONFIG=" + missing}, []string{"validate", "--config", cfg}, 0, "ok: 2 jobs"}, // the flag wins
		{[]string{"BATON_CONFIG=" + missing}, []string{"run"}, exitUsage, missing + " ($BATON_CONFIG) does not exist"},
		{[]string{"BATON_CONFIG=" + cfg}, []string{"next", "--job", "a", "-n", "1"}, 0, `a: "@every 1m" in UTC`},
		{[]string{"BATON_LOG_LEVEL=loud"}, []string{"run", "--config", cfg}, exitUsage, `$BATON_LOG_LEVEL: unknown log level "loud"`},
		{[]string{"BATON_LOG_FORMAT=xml"}, []string{"worker", "--config", cfg}, exitUsage, `$BATON_LOG_FORMAT: unknown log format "xml"`},
		{[]string{"BATON_HTTP=nonsense"}, []string{"run", "--config", cfg}, exitUsage, `$BATON_HTTP: listen address "nonsense"`},
		{[]string{"BATON_ID=has space"}, []string{"run", "--config", cfg}, exitUsage, `$BATON_ID: replica id "has space"`},
	} {
		p := start(t, tc.env, tc.args...)
		code := p.wait(t, 10*time.Second)
		text := p.stderr.String()
		if tc.code == 0 {
			text = p.stdout.String()
		}
		if code != tc.code || !strings.Contains(text, tc.want) {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want %d and %q", tc.env, tc.args, code, p.stdout.String(), p.stderr.String(), tc.code, tc.want)
		}
	}
}

// baton validate accepts exactly what baton run accepts: every bad file of
// the config package's table stops both, with the same errors.
func TestValidateAndRunAgreeOnBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../config/testdata/*.bad.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			vcode, _, verrs := runIn("validate", f)
			rcode, rerrs := runBaton(t, 20*time.Second, nil, "run", "--config", f)
			// validate's "invalid" is 1, run's configuration error 2
			if vcode != 1 || rcode != 2 {
				t.Fatalf("validate exit %d, run exit %d; want 1 and 2\nvalidate: %s\nrun: %s", vcode, rcode, verrs, rerrs)
			}
			for _, line := range strings.Split(strings.TrimSpace(verrs), "\n") {
				if !strings.Contains(rerrs, strings.TrimPrefix(line, "baton validate: ")) {
					t.Errorf("run does not report %q\nrun: %s", line, rerrs)
				}
			}
		})
	}
}
