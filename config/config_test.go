package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/strictyaml"
	"github.com/batonhq/baton/schedule"
)

// minimal is the smallest useful config; it must load as written.
const minimal = `redis:
  url: redis://127.0.0.1:6379/0
jobs:
  - name: report
    schedule: "*/5 * * * * *"
    exec:
      command: ["sh", "-c", "echo \"$BATON_JOB $BATON_TICK\" >> /tmp/report.log"]
`

func mustLoad(t *testing.T, data string) *Config {
	t.Helper()
	c, err := Load([]byte(data))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestLoadMinimalAppliesDefaults(t *testing.T) {
	c := mustLoad(t, minimal)
	if c.Redis.URL != "redis://127.0.0.1:6379/0" || c.File != "" {
		t.Errorf("Redis.URL = %q, File = %q", c.Redis.URL, c.File)
	}
	if c.Namespace != "baton" || c.Timezone != "UTC" || c.Location != time.UTC || c.MaxClockSkew != 500*time.Millisecond {
		t.Errorf("top-level defaults: %q %q %v %s", c.Namespace, c.Timezone, c.Location, c.MaxClockSkew)
	}
	if c.Locking.Lateness != 10*time.Millisecond || c.Locking.RestartQuarantine != time.Minute || c.Locking.Masters != nil {
		t.Errorf("locking defaults: %+v", c.Locking)
	}
	if c.HTTP.Listen != "" {
		t.Errorf("http.listen = %q, want off", c.HTTP.Listen)
	}
	if w := c.Worker; w.Concurrency != 10 || !reflect.DeepEqual(w.Queues, map[string]int{"default": 1}) || w.ShutdownGrace != 30*time.Second {
		t.Errorf("worker defaults: %+v", w)
	}
	if s := c.Scheduler; s.TickLeaseTTL != 5*time.Second || s.RetentionMargin != time.Minute {
		t.Errorf("scheduler defaults: %+v", s)
	}
	if len(c.Jobs) != 1 {
		t.Fatalf("%d jobs", len(c.Jobs))
	}
	want := Job{
		Name:             "report",
		Schedule:         "*/5 * * * * *",
		Timezone:         "UTC",
		Location:         time.UTC,
		Mode:             ModeCron,
		Exec:             &ExecSpec{Command: []string{"sh", "-c", `echo "$BATON_JOB $BATON_TICK" >> /tmp/report.log`}},
		Concurrency:      ConcurrencyForbid,
		Timeout:          time.Hour,
		MaxRetry:         3,
		RetryBackoff:     10 * time.Second,
		Queue:            "default",
		StartingDeadline: time.Minute,
		Catchup:          CatchupLatest,
		CatchupMax:       10,
		BufferMax:        10,
		LockTTL:          30 * time.Second,
		RestartBackoff:   Backoff{Initial: time.Second, Max: time.Minute},
		Line:             4,
	}
	got := c.Jobs[0]
	if got.Sched == nil {
		t.Fatal("Sched not set")
	}
	from := time.Date(2026, 3, 1, 10, 0, 7, 0, time.UTC)
	if next := got.Sched.Next(from); !next.Equal(from.Add(3 * time.Second)) {
		t.Errorf("Sched.Next(%s) = %s", from, next)
	}
	got.Sched = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job:\n got %+v\nwant %+v", got, want)
	}
	if j, ok := c.Job("report"); !ok || j != &c.Jobs[0] || j.Kind() != "exec" {
		t.Errorf("Job(report) = %v, %v", j, ok)
	}
	if _, ok := c.Job("nope"); ok {
		t.Error("Job(nope) found")
	}
	if got, want := c.Retention(&c.Jobs[0]), time.Minute+5*time.Second+time.Second+time.Minute; got != want {
		t.Errorf("Retention = %s, want %s", got, want)
	}
}

func TestLoadExampleConfig(t *testing.T) {
	t.Setenv("BATON_REDIS_URL", "") // empty: the default applies
	c, err := LoadFile("../config.example.yaml")
	if err != nil {
		t.Fatalf("config.example.yaml:\n%v", err)
	}
	if c.File != "../config.example.yaml" || c.Redis.URL != "redis://127.0.0.1:6379/0" {
		t.Errorf("File = %q, Redis.URL = %q", c.File, c.Redis.URL)
	}
	modes := map[Mode]int{}
	for _, j := range c.Jobs {
		modes[j.Mode]++
	}
	if modes[ModeCron] < 2 || modes[ModeLocal] < 1 || modes[ModeSingleton] < 1 {
		t.Errorf("the example should show cron, local and singleton jobs: %v", modes)
	}
	report, ok := c.Job("report")
	if !ok || report.Schedule != "*/5 * * * * *" || !strings.Contains(strings.Join(report.Exec.Command, " "), "$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN") {
		t.Errorf("report job: %+v", report)
	}
	if j, ok := c.Job("heartbeat"); !ok || j.Schedule != "@every 10s" {
		t.Errorf("heartbeat job: %+v", j)
	}
	if p, ok := c.Job("pump"); !ok || p.Timeout != 0 || p.Schedule != "" || p.Location != nil {
		t.Errorf("pump (singleton) job: %+v", p)
	}
	if d, ok := c.Job("nightly-digest"); !ok || d.Location.String() != "Europe/Berlin" {
		t.Errorf("nightly-digest job: %+v", d)
	}

	t.Setenv("BATON_REDIS_URL", "rediss://:pw@redis.internal:6380/2")
	c, err = LoadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.URL != "rediss://:pw@redis.internal:6380/2" {
		t.Errorf("Redis.URL = %q, want it from BATON_REDIS_URL", c.Redis.URL)
	}
}

// TestExampleShowsEveryOption keeps config.example.yaml complete: every key
// of the schema must appear in it, at least in a comment.
func TestExampleShowsEveryOption(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range t.NumField() {
			key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" || !t.Field(i).IsExported() {
				continue
			}
			p := strictyaml.JoinPath(path, key)
			if !regexp.MustCompile(`(?m)^[\s#-]*` + regexp.QuoteMeta(key) + `:`).Match(data) {
				missing = append(missing, p)
			}
			walk(t.Field(i).Type, p)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("config.example.yaml does not show: %s", strings.Join(missing, ", "))
	}
}

// badFiles maps each testdata/*.bad.yaml to the errors it must give, one
// entry per error, each ":line: ..." after the file name.
var badFiles = map[string][]string{
	"unknown-key": {
		`:8: job "report": schedul: unknown field "schedul" (did you mean "schedule"?)`,
		`:9: job "report": retries: unknown field "retries"`,
	},
	"bad-duration": {
		`:8: job "report": timeout: invalid duration "5 minutes"`,
		`:9: job "report": lock_ttl: invalid duration "30" (add a unit`,
	},
	"duplicate-name":   {`:8: job "report": name: duplicate job name "report" (first defined at line 4)`},
	"bad-name":         {`:4: job "Daily Report": name: invalid name "Daily Report"`},
	"missing-name":     {`:4: jobs[0].name: required`},
	"missing-schedule": {`:4: job "report": schedule: required`},
	"four-fields":      {`:5: job "report": schedule: expected 5 or 6 fields, found 4`},
	"bad-cron-field":   {`:5: job "report": schedule: hour "70": expected 0-23`},
	"never-fires":      {`:5: job "report": schedule: "0 0 30 2 *" never fires`},
	"cron-tz":          {`:5: job "report": schedule: a CRON_TZ= or TZ= prefix is not accepted: set the job's time zone instead`},
	"every-subsecond":  {`:5: job "report": schedule: @every: interval 1.5s is not a whole number of seconds of at least 1s`},
	"unknown-timezone": {
		`:3: timezone: unknown time zone "Mars/Olympus_Mons"`,
		`:9: job "report": timezone: unknown time zone "Europe/Berln"`,
	},
	"local-timezone": {`:3: timezone: "Local" is not allowed`},
	"timezone-and-spec": { // a bad zone does not hide a bad spec
		`:3: timezone: unknown time zone "Mars/Olympus_Mons"`,
		`:6: job "report": schedule: hour "25": expected 0-23`,
		`:9: job "report": timezone: unknown time zone "Europe/Berln"`,
		`:11: job "cleanup": schedule: "0 0 30 2 *" never fires`,
	},
	"two-kinds": {`:8: job "report": http: set only one of exec, http or handler, found exec and http`},
	"no-kind":   {`:4: job "report": set one of exec, http or handler`},
	"bad-concurrency": {
		`:8: job "report": concurrency: unknown policy "skip" (want forbid, allow, replace, buffer_one or buffer_all)`,
		`:9: job "report": catchup: unknown policy "none" (want skip, latest or all)`,
		`:10: job "report": mode: unknown mode "daemon" (want cron, local or singleton)`,
	},
	"one-shot": {
		`:5: job "report": at: "2026-12-05 02:00" is not an RFC 3339 time (such as 2026-12-05T02:00:00+01:00)`,
		`:10: job "both": at: set schedule or at, not both (at is a single tick)`,
		`:14: job "windowed": at: "2026-12-05T02:00:00.5+01:00": ticks fall on whole seconds`,
		`:15: job "windowed": start: not with at: a one-shot job has its one tick`,
		`:16: job "windowed": max_runs: must be >= 0 (0: no limit), got -1`,
		`:21: job "daemon": at: not allowed for singleton jobs`,
	},
	"buffer-max": {`:9: job "report": buffer_max: must be between 1 and 100, got 101`},
	"catchup-max": {
		`:9: job "report": catchup_max: must be between 1 and 1000, got 0`,
		`:14: job "other": catchup_max: must be between 1 and 1000, got 5000`,
	},
	"unset-env": {`:2: redis.url: environment variable BATON_TEST_SURELY_UNSET_VAR is not set`},
	"bad-redis-url": {
		`:2: redis.url: invalid Redis URL "http://user:xxxxx@127.0.0.1:6379/0": scheme must be redis:// or rediss:// (TLS), got "http://"`,
		`:5: locking.masters[0]: invalid Redis URL "redis://user:xxxxx@127.0.0.1:6379/x": the path after host:port must be empty or /N, a database number`,
	},
	"redis-none":        {`.bad.yaml: redis: required: set one of url, sentinel or cluster`},
	"redis-two":         {`:3: redis.cluster: set only one of url, sentinel or cluster, found url and cluster`},
	"even-masters":      {`:4: locking.masters: 2 masters: use 1, 3, 5 or 7. With an even number a quorum needs 2 of 2`},
	"duplicate-masters": {`:7: locking.masters[2]: the same master as masters[0] ("127.0.0.1:6380/0")`},
	"operating": {
		`:3: redis.tls: cert_file and key_file go together: set both or neither`,
		`:6: http.token: is 5 bytes, want at least 16`,
		`:8: worker.poll_interval: must be between 10ms and 10s, got 5ms`,
		`:9: worker.exec_cgroup: must be auto, off or the absolute path of a cgroup v2 directory, got "system.slice/baton.service"`,
		`:11: history.runs: must be between 0 (no history) and 100000, got -1`,
		`:12: history.max_age: must be >= 1m, got 30s`,
	},
	"http-hosts": {
		`:4: http.public_reads: only means something with http.token`,
		`:6: http.hosts[0]: "" is empty: write a DNS name such as baton.internal`,
		`:7: http.hosts[1]: "https://baton.example/" is not a name: write the host alone, without scheme or path`,
		`:8: http.hosts[2]: "10.0.0.7" is an IP address: IP addresses are always answered, list names only`,
		`:9: http.hosts[3]: "baton.example:8080" has a port`,
		`:10: http.hosts[4]: "*" would answer every name`,
		`:11: http.hosts[5]: "foo.*.example" has a "*" inside: only a leading "*." is a wildcard`,
		`:12: http.hosts[6]: "bad_name.example" is not a DNS name: label "bad_name"`,
		`:13: http.hosts[7]: "*.com" covers a whole top-level domain`,
		`:15: http.hosts[9]: "baton.example." is listed twice`,
	},
	"quarantine": {`:8: locking.restart_quarantine: 10s is shorter than the longest lock TTL (2m, lock_ttl of job "report")`},
	"singleton-schedule": {
		`:5: job "report": schedule: not allowed for singleton jobs`,
		`:9: job "report": catchup: not allowed for singleton jobs`,
		`:10: job "report": queue: not allowed for singleton jobs: they do not go through the queue`,
		`:11: job "report": concurrency: not allowed for singleton jobs`,
	},
	"singleton-http": {`:5: job "report": http: a singleton runs exec or handler, not http`},
	"local-queue": {
		`:9: job "report": queue: not allowed for local jobs`,
		`:10: job "report": max_retry: not allowed for local jobs`,
	},
	"leader-cron": {
		`:8: job "report": leader: only for mode: local`,
		`:9: job "report": restart_backoff: only for mode: singleton`,
	},
	"unknown-queue": {
		`:11: job "report": queue: queue "critcal" is not in worker.queues (have: critical)`,
		`:12: job "other": queue: the default queue "default" is not in worker.queues (have: critical): set queue`,
	},
	"retention":     {`:8: job "report": starting_deadline: asynq retention would be 200h1m6s (starting_deadline 200h + scheduler.tick_lease_ttl 5s + 2 x max_clock_skew 500ms + scheduler.retention_margin 1m), more than the 7-day limit`},
	"reserved-env":  {`:9: job "report": exec.env.BATON_X: names starting with BATON_ are reserved`},
	"empty-command": {`:7: job "report": exec.command: required: a non-empty argv`},
	"http-spec": {
		`:7: job "report": http.method: "post": write methods in upper case (POST)`,
		`:8: job "report": http.url: scheme must be http:// or https://, got "ftp://"`,
		`:10: job "report": http.headers.X-Baton-Job: X-Baton-* headers are reserved`,
		`:11: job "report": http.expect_status[1]: status 999 is not between 100 and 599`,
	},
	"handler-name": {`:7: job "report": handler.name: required`},
	"payload-keys": {`:9: job "report": handler.payload: mapping keys must be strings to convert to JSON`},
	"jitter-deadline": {
		`:9: job "report": jitter: 30s must be below starting_deadline (30s)`,
	},
	"deadline-takeover": {
		`:10: job "report": starting_deadline: 5s is too short for another replica to take over a tick whose owner died: it must exceed scheduler.tick_lease_ttl 5s + the follower delay 500ms + jitter 0s = 5.5s`,
	},
	"jitter": {
		`:8: job "report": jitter: 5s is not shorter than the schedule's interval (5s)`,
		`:9: job "report": lock_ttl: must be at least 1s, got 500ms`,
	},
	"top-level": {
		`:3: namespace: invalid namespace "Baton!"`,
		`:4: max_clock_skew: must be > 0, got 0s`,
		`:6: http.listen: invalid address "localhost": missing port in address`,
		`:8: worker.concurrency: must be >= 1, got 0`,
		`:10: worker.queues.default: priority weight must be >= 1, got 0`,
		`:12: scheduler.tick_lease_ttl: must be at least 100ms, got 10ms`,
	},
	"wrong-types": {
		`:7: job "report": exec.command: expected a list, got "sh -c true"`,
		`:8: job "report": max_retry: expected an integer, got "many"`,
		`:9: job "report": paused: expected true or false, got "maybe"`,
		`:10: job "report": queue: expected a string, got a list`,
	},
	"duplicate-key": {`:9: job "report": timeout: duplicate key (first at line 8)`},
	"syntax":        {`:5: found unexpected end of stream`},
	"not-mapping":   {`:1: the top level must be a mapping, got a list`},
	"two-documents": {`:8: a config file holds one YAML document; found another`},
	"multi": {
		`:3: redis.url: environment variable BATON_TEST_SURELY_UNSET_VAR is not set`,
		`:4: namespace: invalid namespace "Baton"`,
		`:6: worker.concurrency: must be >= 1, got 0`,
		`:9: job "report": schedule: expected 5 or 6 fields, found 4`,
		`:12: job "report": timeout: invalid duration "5 minutes"`,
		`:13: job "report": colour: unknown field "colour"`,
		`:14: job "report": name: duplicate job name "report" (first defined at line 8)`,
		`:18: job "report": exec: set only one of exec, http or handler, found http and exec`,
		`:22: job "pump": schedule: not allowed for singleton jobs`,
		`:26: job "pump": exec.env.BATON_X: names starting with BATON_ are reserved`,
		`:27: jobs[3].name: required`,
		`:29: jobs[3].catchup_max: must be between 1 and 1000, got 0`,
	},
}

func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".bad.yaml")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := badFiles[name]
			if !ok {
				t.Fatalf("%s has no entry in badFiles", file)
			}
			c, err := LoadFile(file)
			if c != nil {
				t.Errorf("LoadFile returned a config along with the error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(ce.Errors) {
				t.Errorf("Error() has %d lines for %d errors", len(got), len(ce.Errors))
			}
			if len(got) != len(want) {
				t.Errorf("got %d errors, want %d:\n%s", len(got), len(want), err)
			}
			for i, w := range want {
				if i >= len(got) || !strings.HasPrefix(got[i], file) || !strings.Contains(got[i], w) {
					t.Errorf("error %d: want %s%s...\ngot:\n%s", i, file, w, err)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("an error shows a password:\n%s", err)
			}
		})
	}
	for name := range badFiles {
		if !seen[name] {
			t.Errorf("badFiles[%q] has no testdata/%s.bad.yaml", name, name)
		}
	}
}

// TestManyErrorsFields checks the structured form of a file with many
// problems: every one is reported, with file, line, job and field.
func TestManyErrorsFields(t *testing.T) {
	_, err := LoadFile("testdata/multi.bad.yaml")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	type key struct {
		Line       int
		Job, Field string
	}
	var got []key
	for _, fe := range ce.Errors {
		if fe.File != "testdata/multi.bad.yaml" {
			t.Errorf("File = %q", fe.File)
		}
		got = append(got, key{fe.Line, fe.Job, fe.Field})
	}
	want := []key{
		{3, "", "redis.url"},
		{4, "", "namespace"},
		{6, "", "worker.concurrency"},
		{9, "report", "schedule"},
		{12, "report", "timeout"},
		{13, "report", "colour"},
		{14, "report", "name"},
		{18, "report", "exec"},
		{22, "pump", "schedule"},
		{26, "pump", "exec.env.BATON_X"},
		{27, "", "jobs[3].name"},
		{29, "", "jobs[3].catchup_max"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %v\nwant %v", got, want)
	}
	var fe FieldError
	if !errors.As(err, &fe) || fe.Line != 3 {
		t.Errorf("errors.As(FieldError) = %+v", fe)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		fe   FieldError
		want string
	}{
		{FieldError{"config.yaml", 12, "report", "schedule", "expected 5 or 6 fields, found 4"}, `config.yaml:12: job "report": schedule: expected 5 or 6 fields, found 4`},
		{FieldError{"config.yaml", 3, "", "redis.url", "bad"}, `config.yaml:3: redis.url: bad`},
		{FieldError{"<input>", 0, "", "redis", "required"}, `<input>: redis: required`},
		{FieldError{"<input>", 7, "", "", "syntax"}, `<input>:7: syntax`},
	} {
		if got := tc.fe.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadEmpty(t *testing.T) {
	for _, data := range []string{"", "# only a comment\n", "~\n"} {
		_, err := Load([]byte(data))
		if err == nil || err.Error() != "<input>: redis: required: set one of url, sentinel or cluster" {
			t.Errorf("Load(%q) = %v", data, err)
		}
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("BATON_TEST_URL", "redis://10.0.0.7:6379/3")
	t.Setenv("BATON_TEST_EMPTY", "")
	t.Setenv("BATON_TEST_CONC", "4")
	t.Setenv("BATON_TEST_TIMEOUT", "90s")
	os.Unsetenv("BATON_TEST_SURELY_UNSET_VAR")
	c := mustLoad(t, `redis:
  url: ${BATON_TEST_URL}
namespace: ${BATON_TEST_EMPTY:-}
timezone: ${BATON_TEST_SURELY_UNSET_VAR:-Europe/Paris}
worker:
  concurrency: ${BATON_TEST_CONC}
  queues: {default: "${BATON_TEST_CONC}"}
jobs:
  - name: report
    schedule: "@every ${BATON_TEST_SURELY_UNSET_VAR:-10}s"
    timeout: ${BATON_TEST_TIMEOUT}
    exec:
      command: ["sh", "-c", "echo $HOME $$HOME $${HOME} $$$$ $ a$ ${BATON_TEST_EMPTY:-dflt}"]
      env:
        "${NOT_EXPANDED}": "${BATON_TEST_EMPTY}"
`)
	j := &c.Jobs[0]
	for _, tc := range []struct{ what, got, want string }{
		{"set", c.Redis.URL, "redis://10.0.0.7:6379/3"},
		{"empty counts as absent", c.Namespace, "baton"},
		{"default", c.Timezone, "Europe/Paris"},
		{"default inside a value", j.Schedule, "@every 10s"},
		{"$$ and bare $VAR", j.Exec.Command[2], "echo $HOME $HOME ${HOME} $$ $ a$ dflt"},
		{"keys are not expanded", strings.Join(slices.Collect(mapKeys(j.Exec.Env)), ","), "${NOT_EXPANDED}"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if c.Worker.Concurrency != 4 || c.Worker.Queues["default"] != 4 || j.Timeout != 90*time.Second {
		t.Errorf("typed values from the environment: concurrency %d, queue weight %d, timeout %s", c.Worker.Concurrency, c.Worker.Queues["default"], j.Timeout)
	}

	_, err := Load([]byte("redis:\n  url: redis://h:1/0\njobs:\n  - name: a\n    schedule: '@hourly'\n    exec:\n      command: [echo, '${BATON_TEST_SURELY_UNSET_VAR}']\n"))
	if err == nil || err.Error() != `<input>:7: job "a": exec.command[1]: environment variable BATON_TEST_SURELY_UNSET_VAR is not set (use ${BATON_TEST_SURELY_UNSET_VAR:-default} to give a default)` {
		t.Errorf("unset variable: %v", err)
	}
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"A": "1", "E": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "1"},
		{in: "x${A}y${A}", want: "x1y1"},
		{in: "${A:-d}", want: "1"},
		{in: "${E:-d}", want: "d"},
		{in: "${E}", want: ""},
		{in: "${U:-}", want: ""},
		{in: "${U:-a b:c}", want: "a b:c"},
		{in: "$A $ $1 $", want: "$A $ $1 $"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$$${A}", want: "$1"},
		{in: "${U}", err: "environment variable U is not set"},
		{in: "echo ${BATON_TICK}", err: "write $${BATON_TICK} (or $BATON_TICK in a shell command)"},
		{in: "${}", err: "bad variable name in ${}"},
		{in: "${1A}", err: "bad variable name"},
		{in: "${A-x}", err: "bad variable name in ${A-x}"},
		{in: "a ${A", err: `unterminated "${A"`},
	} {
		got, _, err := expandEnv(tc.in, lookup, nil)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("expandEnv(%q) error = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestModesAndKinds(t *testing.T) {
	c := mustLoad(t, `redis:
  sentinel: {master: mymaster, addrs: ["10.0.0.1:26379"], password: pw, db: 2}
worker:
  queues: {critical: 5, default: 1}
jobs:
  - name: ping
    schedule: "0 */2 * * *"
    timezone: America/New_York
    queue: critical
    concurrency: replace
    catchup: all
    catchup_max: 1000
    http:
      url: http://localhost:8080/tick
      headers: {Authorization: Bearer x}
      expect_status: [200, 204]
  - name: cleanup
    schedule: "@daily"
    mode: local
    leader: true
    handler:
      name: cleanup.sessions
      payload: {older_than: 24h, batch: 500, tags: [a, b], nested: {ok: true}, none: ~}
  - name: pump
    mode: singleton
    timeout: 6h
    lock_ttl: 10s
    restart_backoff: {initial: 500ms, max: 10s}
    handler: {name: pump}
`)
	ping, _ := c.Job("ping")
	if ping.HTTP.Method != "GET" || ping.Kind() != "http" || ping.Location.String() != "America/New_York" || ping.Concurrency != ConcurrencyReplace || ping.Catchup != CatchupAll {
		t.Errorf("ping: %+v %+v", ping, ping.HTTP)
	}
	cleanup, _ := c.Job("cleanup")
	var payload map[string]any
	if err := json.Unmarshal(cleanup.Handler.Payload, &payload); err != nil {
		t.Fatalf("payload %s: %v", cleanup.Handler.Payload, err)
	}
	wantPayload := map[string]any{"older_than": "24h", "batch": 500.0, "tags": []any{"a", "b"}, "nested": map[string]any{"ok": true}, "none": nil}
	if !reflect.DeepEqual(payload, wantPayload) || !cleanup.Leader || cleanup.Mode != ModeLocal {
		t.Errorf("cleanup payload = %s, job %+v", cleanup.Handler.Payload, cleanup)
	}
	pump, _ := c.Job("pump")
	if pump.Timeout != 6*time.Hour || pump.RestartBackoff != (Backoff{500 * time.Millisecond, 10 * time.Second}) || pump.Handler.Payload != nil {
		t.Errorf("pump: %+v", pump)
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	c, err := LoadFile("testdata/anchors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Job("a")
	b, _ := c.Job("b")
	if a.Timeout != 30*time.Second || a.MaxRetry != 1 || a.Exec.Command[0] != "date" || a.Line != 10 {
		t.Errorf("a: %+v", a)
	}
	if b.Timeout != 30*time.Second || b.MaxRetry != 0 || b.Schedule != "@every 7s" {
		t.Errorf("b: %+v", b)
	}
}

func TestRedacted(t *testing.T) {
	c := mustLoad(t, `redis:
  url: redis://user:s3cret@10.0.0.1:6379/0
locking:
  masters: [redis://:s3cret@10.0.0.1:6379, redis://:s3cret@10.0.0.2:6379, redis://:s3cret@10.0.0.3:6379]
jobs:
  - name: hook
    schedule: "@every 1m"
    http:
      url: https://bot:s3cret@example.com/hook
      headers: {Authorization: Bearer s3cret}
  - name: script
    schedule: "@every 1m"
    exec:
      command: [sh, -c, 'echo "$$PGPASSWORD" $${literal}']
      env: {PGPASSWORD: s3cret}
`)
	out := c.Redacted()
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "xxxxx") {
		t.Errorf("Redacted shows a secret:\n%s", out)
	}
	again, err := Load([]byte(out))
	if err != nil {
		t.Fatalf("Redacted output does not load: %v\n%s", err, out)
	}
	if again.Redacted() != out {
		t.Errorf("Redacted is not stable:\n%s\n---\n%s", out, again.Redacted())
	}
	if s, _ := again.Job("script"); s.Exec.Command[2] != `echo "$PGPASSWORD" ${literal}` {
		t.Errorf("$ not kept through Redacted: %q", s.Exec.Command[2])
	}

	if got := redact.URL("redis://user:pw@h:6379/0"); got != "redis://user:xxxxx@h:6379/0" {
		t.Errorf("redact.URL = %q", got)
	}
	if got := redact.URL("redis://h:6379/0"); got != "redis://h:6379/0" {
		t.Errorf("redact.URL = %q", got)
	}
	if got := redact.URL("redis://u:p w@h:bad port"); strings.Contains(got, "p w") {
		t.Errorf("redact.URL = %q", got)
	}
}

// TestRedactedExampleLoads: the effective example config prints as YAML that
// loads to the same config (env values are masked).
func TestRedactedExampleLoads(t *testing.T) {
	t.Setenv("BATON_REDIS_URL", "")
	c, err := LoadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load([]byte(c.Redacted()))
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Redacted())
	}
	if again.Redacted() != c.Redacted() {
		t.Errorf("round trip changed the config:\n%s\n---\n%s", c.Redacted(), again.Redacted())
	}
}

// TestScheduleParsedInZone checks that Load parses each schedule with
// schedule.Parse in the job's zone (the parser itself is tested in
// package scheduler), and leaves singletons without one.
func TestScheduleParsedInZone(t *testing.T) {
	c := mustLoad(t, `redis: {url: redis://h:1/0}
jobs:
  - name: berlin
    schedule: "0 3 * * *"
    timezone: Europe/Berlin
    exec: {command: ["true"]}
  - name: every
    schedule: "@every 7s"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`)
	from := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		job  string
		want time.Time
	}{
		{"berlin", time.Date(2026, 3, 2, 2, 0, 0, 0, time.UTC)}, // 03:00 CET
		{"every", time.Unix((from.Unix()/7+1)*7, 0)},
	} {
		j, _ := c.Job(tc.job)
		if got := j.Sched.Next(from); !got.Equal(tc.want) {
			t.Errorf("%s: Next(%s) = %s, want %s", tc.job, from, got, tc.want)
		}
	}
	if p, _ := c.Job("pump"); p.Sched != nil {
		t.Errorf("singleton has a schedule: %v", p.Sched)
	}
}

func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 8; i++ {
		fmt.Fprintf(&b, "x-a%d: &a%d [", i, i)
		for k := range 10 {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("redis: {url: redis://h:1/0}\njobs:\n  - name: a\n    schedule: '@hourly'\n    handler: {name: x, payload: *a7}\n")
	start := time.Now()
	_, err := Load([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") || time.Since(start) > 2*time.Second {
		t.Errorf("after %s: %v", time.Since(start), err)
	}
}

// A few long strings aliased a few thousand times: few nodes, gigabytes of
// text. Refused at once, naming the bound.
func TestAliasBombOfBytes(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "x-s: &s %q\n", strings.Repeat("y", 60_000))
	b.WriteString("x-a0: &a0 [*s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s, *s]\n")
	for i := 1; i < 4; i++ {
		fmt.Fprintf(&b, "x-a%d: &a%d [", i, i)
		for k := range 16 {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("redis: {url: redis://h:1/0}\njobs:\n  - name: a\n    schedule: '@hourly'\n    handler: {name: x, payload: *a3}\n")
	if b.Len() > 70_000 {
		t.Fatalf("the file is %d bytes; the point is a small one", b.Len())
	}
	start := time.Now()
	_, err := Load([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "MiB of text, counting an aliased value") || time.Since(start) > 2*time.Second {
		t.Errorf("after %s: %v", time.Since(start), err)
	}
}

// A job whose records would outnumber scheduler.max_tick_records is
// refused, with the number.
func TestTooManyTickRecords(t *testing.T) {
	base := "redis: {url: redis://h:1/0}\n%sjobs:\n  - name: a\n    schedule: '@every 1s'\n    starting_deadline: %s\n    exec: {command: [\"true\"]}\n"
	// retention 3h + 5s + 1s + 1m = 10866s: one record a second
	_, err := Load(fmt.Appendf(nil, base, "", "3h"))
	if err == nil || !strings.Contains(err.Error(), "would keep 10867 tick records") || !strings.Contains(err.Error(), "max_tick_records 10000") {
		t.Errorf("3h deadline, every second: %v", err)
	}
	if _, err := Load(fmt.Appendf(nil, base, "scheduler: {max_tick_records: 20000}\n", "3h")); err != nil {
		t.Errorf("raised bound: %v", err)
	}
	if _, err := Load(fmt.Appendf(nil, base, "", "1h")); err != nil {
		t.Errorf("1h deadline: %v", err)
	}
	if _, err := Load(fmt.Appendf(nil, base, "scheduler: {max_tick_records: 0}\n", "1m")); err == nil || !strings.Contains(err.Error(), "max_tick_records: must be >= 1") {
		t.Errorf("zero bound: %v", err)
	}
}

// FuzzLoad: Load never panics and returns exactly one of a config and an
// error. Seeds are the test files.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "../config.example.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(minimal))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Load = %v, %v", c, err)
		}
		if c != nil {
			if _, err := Load([]byte(c.Redacted())); err != nil {
				t.Fatalf("Redacted output does not load: %v\n%s", err, c.Redacted())
			}
		}
	})
}

// A variable that is set but empty, written as ${VAR} where the field needs
// a value, is an error naming the variable, not a silent fall-back to the
// field's default; ${VAR:-} takes the default on purpose, and an empty env
// value for a job stays a value.
func TestSetButEmptyVariable(t *testing.T) {
	t.Setenv("BATON_TEST_NS", "")
	_, err := Load([]byte("redis:\n  url: redis://h:1/0\nnamespace: ${BATON_TEST_NS}\njobs: []\n"))
	if err == nil || !strings.Contains(err.Error(), `<input>:3: namespace: environment variable BATON_TEST_NS is set but empty`) {
		t.Fatalf("Load = %v, want an error naming BATON_TEST_NS", err)
	}
	c := mustLoad(t, `redis:
  url: redis://h:1/0
namespace: ${BATON_TEST_NS:-}
jobs:
  - name: a
    schedule: "@hourly"
    exec:
      command: ["true"]
      env: {EMPTY: "${BATON_TEST_NS}"}
`)
	if c.Namespace != "baton" || c.Jobs[0].Exec.Env["EMPTY"] != "" {
		t.Fatalf("namespace %q, env %q", c.Namespace, c.Jobs[0].Exec.Env)
	}
}

// A small config whose ${VAR} values expand it beyond MaxFileSize (a 64 KiB
// variable referenced 300 times, as a 16 MiB file could reference one two
// million times) is refused at the value that passes the bound, naming it,
// and nothing after it is expanded.
func TestConfigExpandedBeyondTheSizeBoundRefused(t *testing.T) {
	t.Setenv("BATON_T_BIG", strings.Repeat("a", 64<<10))
	var b strings.Builder
	b.WriteString(minimal + "x-args:\n")
	for range 300 {
		b.WriteString("  - ${BATON_T_BIG}\n")
	}
	_, err := Load([]byte(b.String()))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want an *Error", err)
	}
	want := "make the config larger than the bound of 16 MiB (16777216 bytes)"
	if len(ce.Errors) != 1 || !strings.Contains(ce.Errors[0].Msg, want) || ce.Errors[0].Line == 0 {
		t.Errorf("errors %v, want one, with its line, saying %q", ce.Errors, want)
	}
}

// A config file above MaxFileSize is refused before it is decoded, with a
// message naming the file and the bound: a 300 MB file (which took 2 GB to
// validate) is refused from its size alone, a stream above the bound after
// reading MaxFileSize+1 bytes, and Load refuses such bytes too.
func TestConfigAboveTheSizeBoundRefusedUndecoded(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 300<<20); err != nil { // sparse: no 300 MB written
		t.Fatal(err)
	}
	want := "above the bound of 16 MiB (16777216 bytes) for a config: it is refused before it is decoded"
	for _, load := range []func(string) (*Config, error){LoadFile, LoadConnectionFile} {
		_, err := load(huge)
		var ce *Error
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), huge+": the file is 314572800 bytes (300.0 MiB), ") || !strings.Contains(err.Error(), want) {
			t.Errorf("a 300 MB file: %v", err)
		}
	}
	over := append([]byte(minimal+"x-pad: "), make([]byte, MaxFileSize)...)
	for i := len(minimal) + 7; i < len(over); i++ {
		over[i] = 'a'
	}
	if _, err := Load(over); err == nil || !strings.HasPrefix(err.Error(), "<input>: the file is ") || !strings.Contains(err.Error(), want) {
		t.Errorf("Load of %d bytes: %v", len(over), err)
	}
	fifo := filepath.Join(dir, "stream.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no fifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = w.Write(over) // the reader stops at the bound and closes
		_ = w.Close()
		done <- err
	}()
	if _, err := LoadFile(fifo); err == nil || !strings.HasPrefix(err.Error(), fifo+": the file is more than 16 MiB, ") {
		t.Errorf("a stream of %d bytes: %v", len(over), err)
	}
	<-done
}

// H in a job's schedule is the value picked from the job's name: the job
// keeps its spec as written, Hashed holds the spec its ticks come from,
// and a job of another name gets its own minute. A wrong H is refused
// with the job's line and the field.
func TestScheduleHPicksAValueFromTheJobsName(t *testing.T) {
	c := mustLoad(t, `
redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: report
    schedule: "H * * * *"
    exec: {command: ["true"]}
  - name: nightly
    schedule: "30 H * * *"
    exec: {command: ["true"]}
  - name: plain
    schedule: "*/5 * * * *"
    exec: {command: ["true"]}
`)
	report, _ := c.Job("report")
	if report.Schedule != "H * * * *" || report.Hashed != "4 * * * *" {
		t.Errorf("report: schedule %q, hashed %q; want the spec as written and 4 * * * *", report.Schedule, report.Hashed)
	}
	from := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	if got := report.Sched.Next(from); !got.Equal(from.Add(4 * time.Minute)) {
		t.Errorf("report's next tick after %s = %s, want 10:04", from, got)
	}
	if nightly, _ := c.Job("nightly"); nightly.Hashed != "30 20 * * *" {
		t.Errorf("nightly: hashed %q, want 30 20 * * *", nightly.Hashed)
	}
	if plain, _ := c.Job("plain"); plain.Hashed != "" {
		t.Errorf("a spec without H has hashed %q, want none", plain.Hashed)
	}
	_, err := Load([]byte(`
redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: report
    schedule: "H(40-20) * * * *"
    exec: {command: ["true"]}
`))
	if err == nil || !strings.Contains(err.Error(), `<input>:5: job "report": schedule:`) || !strings.Contains(err.Error(), `minute field "H(40-20)": the range's start is after its end`) {
		t.Errorf("a wrong H = %v, want its line and field named", err)
	}
}

// dst chooses a job's policy on clock changes; the job's ticks follow it,
// and a policy that cannot apply is refused with the job's line.
func TestJobDSTPolicy(t *testing.T) {
	c := mustLoad(t, `
redis: {url: "redis://127.0.0.1:6379/0"}
timezone: Europe/Berlin
jobs:
  - name: rollup
    schedule: "30 * * * *"
    dst: once
    exec: {command: ["true"]}
  - name: plain
    schedule: "30 * * * *"
    exec: {command: ["true"]}
`)
	// 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 is skipped
	after := time.Date(2026, 3, 29, 1, 30, 0, 0, c.Location)
	rollup, _ := c.Job("rollup")
	plain, _ := c.Job("plain")
	if got := rollup.Sched.Next(after); got.Format("15:04 MST") != "03:00 CEST" {
		t.Errorf("dst once: next after 01:30 CET = %s, want the jump, 03:00 CEST", got.In(c.Location))
	}
	if got := plain.Sched.Next(after); got.In(c.Location).Format("15:04 MST") != "03:30 CEST" {
		t.Errorf("dst vixie (default) for a wildcard spec: next after 01:30 CET = %s, want 03:30 CEST", got.In(c.Location))
	}
	for yaml, want := range map[string]string{
		`    schedule: "0 2 * * *"
    dst: twice`: `dst: unknown policy "twice" (want vixie, once, skip or both)`,
		`    schedule: "@every 1h"
    dst: once`: `@every follows absolute time`,
		`    at: "2027-01-01T00:00:00Z"
    dst: skip`: `dst: not for a one-shot job`,
		`    mode: singleton
    dst: skip`: `dst: not allowed for singleton jobs`,
	} {
		_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: j\n" + yaml + "\n    exec: {command: [\"true\"]}\n"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `job "j"`) {
			t.Errorf("%s: %v, want an error saying %q", yaml, err, want)
		}
	}
}

// Named calendars: a job excludes the days of some and runs only on those
// of others; its ticks skip the other days (by the date in its zone), and
// Unfiltered keeps the spec's own ticks for baton next. A long list comes
// from a file beside the config.
func TestCalendarsExcludeAndOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "holidays.txt"), []byte("# public holidays\n2026-12-25\n2026-12-26 # second day\n2026-12-31..2027-01-01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(path, []byte(`redis: {url: "redis://127.0.0.1:6379/0"}
timezone: Europe/Berlin
calendars:
  holidays-de:
    dates: [2026-12-24]
    file: holidays.txt
  business-days:
    weekdays: [mon, tue, wed, thu, fri]
jobs:
  - name: report
    schedule: "0 9 * * *"
    exclude: [holidays-de]
    only: [business-days]
    exec: {command: ["true"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := c.Job("report")
	var got []string
	for _, at := range schedule.Ticks(j.Sched, time.Date(2026, 12, 22, 0, 0, 0, 0, c.Location), time.Date(2027, 1, 6, 0, 0, 0, 0, c.Location), 20) {
		got = append(got, at.In(c.Location).Format("01-02"))
	}
	// 24, 25 (Fri) holidays; 26, 27 a weekend; 31, 1 holidays; 2, 3 a weekend
	if want := "[12-22 12-23 12-28 12-29 12-30 01-04 01-05]"; fmt.Sprint(got) != want {
		t.Errorf("ticks %v, want %s", got, want)
	}
	if j.Unfiltered == nil || j.Unfiltered.Next(time.Date(2026, 12, 24, 0, 0, 0, 0, c.Location)).Day() != 24 {
		t.Errorf("Unfiltered does not keep the spec's own ticks")
	}
	for yaml, want := range map[string]string{
		"calendars: {h: {dates: [2026-13-01]}}\njobs: []":              `calendars.h.dates[0]: "2026-13-01" is no date`,
		"calendars: {h: {ranges: [2026-12-31..2026-12-01]}}\njobs: []": "the range ends (2026-12-01) before it starts",
		"calendars: {h: {ranges: [2026-12-31]}}\njobs: []":             "want FROM..TO",
		"calendars: {h: {weekdays: [caturday]}}\njobs: []":             `"caturday" is no weekday`,
		"calendars: {h: {}}\njobs: []":                                 "calendars.h: empty",
		"calendars: {H: {dates: [2026-12-24]}}\njobs: []":              "invalid calendar name",
		"calendars: {h: {file: missing.txt}}\njobs: []":                "cannot read missing.txt",
		"calendars: {h: {dates: [2026-12-24]}}\njobs:\n  - name: j\n    schedule: \"@daily\"\n    exclude: [holidays]\n    exec: {command: [\"true\"]}": `job "j": exclude[0]: no calendar "holidays": the calendars are h`,
		"calendars: {h: {weekdays: [mon]}}\njobs:\n  - name: j\n    schedule: \"0 9 * * 2\"\n    only: [h]\n    exec: {command: [\"true\"]}":            "has no tick on a day its exclude and only calendars leave",
		"calendars: {h: {weekdays: [mon]}}\njobs:\n  - name: j\n    mode: singleton\n    only: [h]\n    exec: {command: [\"true\"]}":                    "not allowed for singleton jobs",
	} {
		_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\n" + yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n%v\nwant an error saying %q", yaml, err, want)
		}
	}
}

// A job's interval (what its jitter must stay below) is that of its own
// ticks, whatever job of the same spec and zone was read before it:
// "7 9 * * *" only on Mondays ticks weekly, without a calendar daily.
func TestJitterIsCheckedAgainstTheJobsOwnIntervalWhenAnotherJobSharesItsSpec(t *testing.T) {
	_, err := Load([]byte(`redis: {url: "redis://127.0.0.1:6379/0"}
calendars:
  mondays: {weekdays: [mon]}
jobs:
  - name: weekly
    schedule: "7 9 * * *"
    only: [mondays]
    exec: {command: ["true"]}
  - name: daily
    schedule: "7 9 * * *"
    jitter: 36h
    starting_deadline: 48h
    exec: {command: ["true"]}
`))
	if err == nil || !strings.Contains(err.Error(), `job "daily": jitter: 36h0m0s is not shorter than the schedule's interval`) {
		t.Errorf("a daily job with a jitter of 36h after a weekly job of its spec: %v; want its jitter refused", err)
	}
	_, err = Load([]byte(`redis: {url: "redis://127.0.0.1:6379/0"}
calendars:
  mondays: {weekdays: [mon]}
jobs:
  - name: daily
    schedule: "8 9 * * *"
    exec: {command: ["true"]}
  - name: weekly
    schedule: "8 9 * * *"
    only: [mondays]
    jitter: 36h
    starting_deadline: 48h
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Errorf("a weekly job with a jitter of 36h after a daily job of its spec: %v; want it loaded", err)
	}
}

// Limits: named at the top, named by jobs; every mistake names its line's
// key; a limit's size counts in the definition of the jobs naming it.
func TestLimitsSharedByJobs(t *testing.T) {
	c, err := Load([]byte(`redis: {url: "redis://127.0.0.1:6379/0"}
limits: {warehouse: 2}
jobs:
  - name: extract
    schedule: "@hourly"
    limit: warehouse
    exec: {command: ["true"]}
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	extract, _ := c.Job("extract")
	report, _ := c.Job("report")
	if name, n := c.LimitOf(extract); name != "warehouse" || n != 2 {
		t.Errorf("LimitOf(extract) = %q, %d; want warehouse, 2", name, n)
	}
	if name, _ := c.LimitOf(report); name != "" {
		t.Errorf("LimitOf(report) = %q, want none", name)
	}
	if got := c.LimitedJobs("warehouse"); fmt.Sprint(got) != "[extract]" {
		t.Errorf("LimitedJobs = %v", got)
	}
	def := c.JobDefinition(extract)
	c.Limits["warehouse"] = 3
	if c.JobDefinition(extract) == def {
		t.Errorf("a limit's size does not count in the definition of a job naming it")
	}
	job := "jobs:\n  - name: j\n    schedule: \"@daily\"\n    %s\n    exec: {command: [\"true\"]}"
	for yaml, want := range map[string]string{
		"limits: {warehouse: 0}\njobs: []":                      "limits.warehouse: must be between 1 and 100 runs at once, got 0",
		"limits: {warehouse: 101}\njobs: []":                    "limits.warehouse: must be between 1 and 100 runs at once, got 101",
		"limits: {Ware: 1}\njobs: []":                           `limits.Ware: invalid limit name "Ware"`,
		"limits: {warehouse: two}\njobs: []":                    "limits.warehouse",
		fmt.Sprintf(job, "limit: warehouse"):                    `job "j": limit: no limit "warehouse": the config defines none (limits: at the top level`,
		"limits: {a: 1, b: 2}\n" + fmt.Sprintf(job, "limit: c"): `job "j": limit: no limit "c": the limits are a, b`,
		"limits: {a: 1}\n" + fmt.Sprintf(job, "limit: \"\""):    `job "j": limit: empty`,
		"limits: {a: 1}\njobs:\n  - name: j\n    mode: singleton\n    limit: a\n    exec: {command: [\"true\"]}": `job "j": limit: not allowed for singleton jobs`,
	} {
		_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\n" + yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n%v\nwant an error saying %q", yaml, err, want)
		}
	}
}

// A chained job ticks at its parents' ticks (fan-in: any of them), waits
// an hour by default; every mistake is named at its key: an unknown or
// repeated parent, a cycle, a schedule of its own, a singleton.
func TestChainedJobsTickWithTheirParents(t *testing.T) {
	c, err := Load([]byte(`redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: extract
    schedule: "0 * * * *"
    exec: {command: ["true"]}
  - name: weekly
    schedule: "30 0 * * 1"
    exec: {command: ["true"]}
  - name: load
    after: [extract, weekly]
    exec: {command: ["true"]}
  - name: report
    after: [load]
    on_parent_failure: run
    starting_deadline: 3h
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	load, _ := c.Job("load")
	report, _ := c.Job("report")
	if load.StartingDeadline != DefaultChainWait || load.OnParentFailure != ParentFailureSkip || report.OnParentFailure != ParentFailureRun || report.StartingDeadline != 3*time.Hour {
		t.Errorf("load waits %s (%s), report %s (%s)", load.StartingDeadline, load.OnParentFailure, report.StartingDeadline, report.OnParentFailure)
	}
	mon := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC) // a Monday
	var got []string
	for at := report.Sched.Next(mon); len(got) < 3; at = report.Sched.Next(at) {
		got = append(got, at.Format("15:04"))
	}
	if fmt.Sprint(got) != "[00:30 01:00 02:00]" {
		t.Errorf("report ticks %v, want extract's and weekly's", got)
	}
	names := func(js []*Job) string {
		var out []string
		for _, j := range js {
			out = append(out, j.Name)
		}
		return fmt.Sprint(out)
	}
	if got := names(c.ParentsAt(load, mon.Add(time.Hour))); got != "[extract]" {
		t.Errorf("load's parents at 01:00: %s", got)
	}
	if got := names(c.ParentsAt(load, mon.Add(30*time.Minute))); got != "[weekly]" {
		t.Errorf("load's parents at 00:30: %s", got)
	}
	if got := names(c.Children("extract")); got != "[load]" {
		t.Errorf("extract's children: %s", got)
	}
	job := func(name, body string) string {
		return "  - name: " + name + "\n    " + body + "\n    exec: {command: [\"true\"]}\n"
	}
	base := job("a", `schedule: "@hourly"`)
	for yaml, want := range map[string]string{
		base + job("b", "after: [nope]"):                                    `job "b": after[0]: no job "nope" in the list`,
		base + job("b", "after: [a, a]"):                                    `job "b": after[1]: "a" named twice`,
		base + job("b", "after: [b]"):                                       `job "b": after[0]: the job itself`,
		base + job("b", "after: [c]") + job("c", "after: [b]"):              `after: a cycle: b -> c -> b`,
		base + job("b", "after: [a]\n    schedule: \"@daily\""):             `job "b": schedule: not with after`,
		base + job("b", "after: [a]\n    timezone: Europe/Berlin"):          `job "b": timezone: not with after`,
		base + job("b", "after: [a]\n    on_parent_failure: maybe"):         `job "b": on_parent_failure: unknown policy "maybe" (want skip or run)`,
		base + job("b", "schedule: \"@daily\"\n    on_parent_failure: run"): `job "b": on_parent_failure: only with after`,
		base + job("b", "after: [a]\n    mode: local"):                      `job "b": after: not for mode: local`,
		base + job("b", "after: [a]\n    mode: singleton"):                  `job "b": after: not for singleton jobs`,
		job("s", "mode: singleton") + job("b", "after: [s]"):                `job "b": after[0]: "s" is a singleton`,
		base + job("b", "after: [\"@t/1\"]"):                                `not after a runtime schedule`,
	} {
		_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n" + yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n%v\nwant an error saying %q", yaml, err, want)
		}
	}
}
