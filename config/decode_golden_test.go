package config

// Loading keeps its behaviour across moves of the code (the job list moved
// from jobs to config at 7b41a71, the strict YAML decoder into
// internal/strictyaml): the same problems, lines, job names and masked
// secrets, the same defaults. loadGolden is what jobs.loadSections printed
// at 7b41a71 for the same documents and environment (full load, and the
// connection-only load of LoadConnectionFile), but for what changed on
// purpose since: an invalid Redis URL is named, masked, and a quoted piece
// of a ${VAR} value is masked.

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

var loadCases = map[string]string{
	"01-merge-defaults.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
namespace: rv
x-common: &common
  timeout: 5m
  max_retry: 1
x-env: &env
  TOKEN: ${RV_TOKEN}
jobs:
  - name: alpha
    <<: *common
    schedule: "@every 1m"
    exec:
      command: ["sh", "-c", "echo $$TOKEN"]
      env: *env
  - name: beta
    schedule: "0 */5 * * * *"
    concurrency: replace
    http:
      url: "https://hook.example/x?key=${RV_TOKEN}"
      headers: {Authorization: "Bearer ${RV_TOKEN}"}
  - name: gamma
    mode: singleton
    exec: {command: ["sleep", "100"]}
  - name: delta
    schedule: "@every 30s"
    mode: local
    timeout: ${RV_EMPTY:-}
    handler: {name: h, payload: {pin: "${RV_PIN}", n: 3}}
`,
	"02-errors.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
x-common: &common
  timeout: 5m
jobs:
  - name: alpha
    <<: *common
    schedule: "@every 1m"
    exec: {command: ["true"]}
    x-note: hi
  - name: beta
    schedule: "@every 1m"
    timeout: ${RV_TOKEN}
    exec: {command: ["true"]}
  - name: gamma
    schedule: "@every 1m"
    lock_ttl: ${RV_EMPTY}
    exec: {command: ["true"]}
  - name: delta
    schedule: "@every 1m"
    retry_backoff: ${RV_UNSET}
    exec: {command: ["true"]}
  - name: eps
    schedule: "@every 1m"
    exec: {command: ["echo", "${BATON_JOB}"]}
  - name: zeta
    schedule: "@every 1m"
    max_retry: many
    timout: 5s
    exec: {command: ["true"], env: {A: [1, 2]}}
  - schedule: "@every 1m"
    exec: {command: ["true"]}
    bogus: 1
worker:
  x-foo: 1
  concurrency: ten
`,
	"03-secret-url.yaml": `redis: {url: "${RV_URL}"}
jobs:
  - name: alpha
    schedule: "@every 1m"
    exec: {command: ["true"], env: {PW: "${RV_TOKEN}"}}
    timeout: "${RV_TOKEN}s"
`,
	"04-syntax.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: alpha
    schedule: "@every 1m
    exec: {command: ["true"]}
`,
	"05-two-docs.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
---
jobs: []
`,
	"06-top-list.yaml": `- a
- b
`,
	"07-dup.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: alpha
    schedule: "@every 1m"
    schedule: "@every 2m"
    exec: {command: ["true"]}
  - name: alpha
    schedule: "@every 1m"
    exec: {command: ["true"]}
`,
	"08-empty.yaml": ``,
	"09-empty-var-top.yaml": `redis: {url: "redis://127.0.0.1:6379/0"}
max_clock_skew: ${RV_EMPTY}
namespace: ${RV_EMPTY:-fallback}
jobs:
  - name: alpha
    schedule: "${RV_SCHED}"
    exec: {command: ["true"]}
`,
}

const loadGolden = `== 01-merge-defaults.yaml full
redis:
  url: redis://127.0.0.1:6379/0
locking:
  lateness: 10ms
  restart_quarantine: 1m
  fresh_deployment: false
namespace: rv
timezone: UTC
max_clock_skew: 500ms
http:
  public_reads: false
worker:
  concurrency: 10
  queues:
    default: 1
  shutdown_grace: 30s
scheduler:
  tick_lease_ttl: 5s
  retention_margin: 1m
  max_tick_records: 10000
security:
  accept_unsigned: false
jobs:
  - name: alpha
    schedule: '@every 1m'
    timezone: UTC
    mode: cron
    exec:
      command: [sh, -c, echo $TOKEN]
      env:
        TOKEN: xxxxx
    concurrency: forbid
    timeout: 5m
    max_retry: 1
    retry_backoff: 10s
    queue: default
    starting_deadline: 1m
    catchup: latest
    catchup_max: 10
    jitter: 0s
    lock_ttl: 30s
    paused: false
  - name: beta
    schedule: 0 */5 * * * *
    timezone: UTC
    mode: cron
    http:
      method: GET
      url: https://hook.example/x?key=xxxxx
      headers:
        Authorization: xxxxx
    concurrency: replace
    timeout: 1h
    max_retry: 3
    retry_backoff: 10s
    queue: default
    starting_deadline: 1m
    catchup: latest
    catchup_max: 10
    jitter: 0s
    lock_ttl: 30s
    paused: false
  - name: gamma
    mode: singleton
    exec:
      command: [sleep, "100"]
    lock_ttl: 30s
    restart_backoff:
      initial: 1s
      max: 1m
    paused: false
  - name: delta
    schedule: '@every 30s'
    timezone: UTC
    mode: local
    handler:
      name: h
      payload:
        "n": 3
        pin: xxxxx
    concurrency: forbid
    timeout: 1h
    starting_deadline: 1m
    catchup: latest
    catchup_max: 10
    jitter: 0s
    lock_ttl: 30s
    leader: false
    paused: false

== 01-merge-defaults.yaml conn
redis:
  url: redis://127.0.0.1:6379/0
locking:
  lateness: 10ms
  restart_quarantine: 1m
  fresh_deployment: false
namespace: rv
timezone: UTC
max_clock_skew: 500ms
http:
  public_reads: false
worker:
  concurrency: 10
  queues:
    default: 1
  shutdown_grace: 30s
scheduler:
  tick_lease_ttl: 5s
  retention_margin: 1m
  max_tick_records: 10000
security:
  accept_unsigned: false

== 02-errors.yaml full
ERR 02-errors.yaml:9: job "alpha": x-note: unknown field "x-note"
02-errors.yaml:12: job "beta": timeout: invalid duration "xxxxx"
02-errors.yaml:16: job "gamma": lock_ttl: environment variable RV_EMPTY is set but empty, so this field would silently keep its default: give it a value, or write ${RV_EMPTY:-} to take the default on purpose
02-errors.yaml:20: job "delta": retry_backoff: environment variable RV_UNSET is not set (use ${RV_UNSET:-default} to give a default)
02-errors.yaml:24: job "eps": exec.command[1]: ${BATON_JOB} is expanded when the config is loaded, but BATON_JOB exists only when the job runs: write $${BATON_JOB} (or $BATON_JOB in a shell command) to leave it to the run
02-errors.yaml:27: job "zeta": max_retry: expected an integer, got "many"
02-errors.yaml:28: job "zeta": timout: unknown field "timout" (did you mean "timeout"?)
02-errors.yaml:29: job "zeta": exec.env.A: expected a string, got a list
02-errors.yaml:30: jobs[6].name: required
02-errors.yaml:32: jobs[6].bogus: unknown field "bogus"
02-errors.yaml:34: worker.x-foo: unknown field "x-foo"
02-errors.yaml:35: worker.concurrency: expected an integer, got "ten"
== 02-errors.yaml conn
redis:
  url: redis://127.0.0.1:6379/0
locking:
  lateness: 10ms
  restart_quarantine: 1m
  fresh_deployment: false
namespace: baton
timezone: UTC
max_clock_skew: 500ms
http:
  public_reads: false
worker:
  concurrency: 10
  queues:
    default: 1
  shutdown_grace: 30s
scheduler:
  tick_lease_ttl: 5s
  retention_margin: 1m
  max_tick_records: 10000
security:
  accept_unsigned: false

== 03-secret-url.yaml full
ERR 03-secret-url.yaml:1: redis.url: invalid Redis URL "xxxxx": invalid URL: a port that is not a number (a password without @host after it?)
03-secret-url.yaml:6: job "alpha": timeout: invalid duration "xxxxxs"
== 03-secret-url.yaml conn
ERR 03-secret-url.yaml:1: redis.url: invalid Redis URL "xxxxx": invalid URL: a port that is not a number (a password without @host after it?)
== 04-syntax.yaml full
ERR 04-syntax.yaml:2: did not find expected key
== 04-syntax.yaml conn
ERR 04-syntax.yaml:2: did not find expected key
== 05-two-docs.yaml full
ERR 05-two-docs.yaml:2: a config file holds one YAML document; found another
== 05-two-docs.yaml conn
ERR 05-two-docs.yaml:2: a config file holds one YAML document; found another
== 06-top-list.yaml full
ERR 06-top-list.yaml:1: the top level must be a mapping, got a list
== 06-top-list.yaml conn
ERR 06-top-list.yaml:1: the top level must be a mapping, got a list
== 07-dup.yaml full
ERR 07-dup.yaml:5: job "alpha": schedule: duplicate key (first at line 4)
07-dup.yaml:7: job "alpha": name: duplicate job name "alpha" (first defined at line 3)
== 07-dup.yaml conn
redis:
  url: redis://127.0.0.1:6379/0
locking:
  lateness: 10ms
  restart_quarantine: 1m
  fresh_deployment: false
namespace: baton
timezone: UTC
max_clock_skew: 500ms
http:
  public_reads: false
worker:
  concurrency: 10
  queues:
    default: 1
  shutdown_grace: 30s
scheduler:
  tick_lease_ttl: 5s
  retention_margin: 1m
  max_tick_records: 10000
security:
  accept_unsigned: false

== 08-empty.yaml full
ERR 08-empty.yaml: redis: required: set one of url, sentinel or cluster
== 08-empty.yaml conn
ERR 08-empty.yaml: redis: required: set one of url, sentinel or cluster
== 09-empty-var-top.yaml full
ERR 09-empty-var-top.yaml:2: max_clock_skew: environment variable RV_EMPTY is set but empty, so this field would silently keep its default: give it a value, or write ${RV_EMPTY:-} to take the default on purpose
== 09-empty-var-top.yaml conn
redis:
  url: redis://127.0.0.1:6379/0
locking:
  lateness: 10ms
  restart_quarantine: 1m
  fresh_deployment: false
namespace: fallback
timezone: UTC
max_clock_skew: 500ms
http:
  public_reads: false
worker:
  concurrency: 10
  queues:
    default: 1
  shutdown_grace: 30s
scheduler:
  tick_lease_ttl: 5s
  retention_margin: 1m
  max_tick_records: 10000
security:
  accept_unsigned: false

`

var loadEnv = map[string]string{"RV_TOKEN": "tok-secret-123", "RV_EMPTY": "", "RV_PIN": "4242",
	"RV_URL": "redis://user:pw-secret-9@127.0.0.1:notaport/0", "RV_SCHED": "@every 2m"}

func loadLookup(k string) (string, bool) { v, ok := loadEnv[k]; return v, ok }

var connSkip = []string{"jobs", "worker", "scheduler", "http", "security", "timezone", "max_clock_skew"}

// the history section (ccd98b8, start_after later) and worker.poll_interval came after
// 7b41a71: left out of the comparison
const (
	laterHistory = "history:\n  runs: 100\n  max_age: 168h\n  start_after: 0s\n"
	laterPoll    = "  poll_interval: 100ms\n"
	// the schedules section came later still, printed at its defaults
	laterSchedules = "schedules:\n  max_payload: 16384\n  history: 3\n  resync: 5m\n  shards: 1\n"
	// worker.lanes came with the Cluster scale-out
	laterLanes = "  lanes: 1\n"
	// worker.exec_cgroup came with the runs' cgroups
	laterExecCgroup = "  exec_cgroup: auto\n"
)

func loadDump(name, data string, skip []string) string {
	cfg, err := loadSections([]byte(data), name, name, loadLookup, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), skip)
	if err != nil {
		return "ERR " + err.Error() + "\n"
	}
	out := cfg.Redacted()
	for _, later := range []string{laterHistory, laterPoll, laterSchedules, laterLanes, laterExecCgroup} {
		out = strings.Replace(out, later, "", 1)
	}
	return out + "\n"
}

// Every problem (unknown keys with did-you-mean, x- keys outside the top
// level, bad types, bad durations, ${VAR} unset, set-but-empty and
// run-time-only variables, duplicate keys and job names, syntax errors, a
// second document, a non-mapping top level) is reported as before, with the
// same line, job name and field, and with ${VAR} values masked; a valid
// document gets the same defaults (list elements through merge keys
// included) and prints the same, secrets masked.
func TestLoadReportsAndDefaultsAsAt7b41a71(t *testing.T) {
	names := make([]string, 0, len(loadCases))
	for n := range loadCases {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		for _, mode := range []string{"full", "conn"} {
			var skip []string
			if mode == "conn" {
				skip = connSkip
			}
			b.WriteString("== " + n + " " + mode + "\n")
			b.WriteString(loadDump(n, loadCases[n], skip))
		}
	}
	got, want := strings.Split(b.String(), "\n"), strings.Split(loadGolden, "\n")
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d differs from 7b41a71:\n got: %s\nwant: %s", i+1, g, w)
		}
	}
	if s := b.String(); strings.Contains(s, "tok-secret-123") || strings.Contains(s, "4242") || strings.Contains(s, "pw-secret-9") {
		t.Errorf("a ${VAR} value shows unmasked:\n%s", s)
	}
}

// LoadConnectionFile (baton lock --config) documents that the sections it
// skips are "neither expanded nor checked". At 7b41a71 the alias bound was
// applied after the skipped sections were removed, so a crontab whose jobs
// section expands (through aliases) past 64 MiB still gave baton lock its
// connection settings. strictyaml.Parse now applies the bound to the whole
// document before loadSections removes anything.
func TestConnectionLoadIgnoresAliasSizeOfSkippedSections(t *testing.T) {
	var b strings.Builder
	b.WriteString("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: a\n    schedule: \"@every 1m\"\n    exec:\n      command:\n")
	fmt.Fprintf(&b, "        - &big \"%s\"\n", strings.Repeat("x", 1<<20))
	for range 70 {
		b.WriteString("        - *big\n")
	}
	if out := loadDump("bomb.yaml", b.String(), nil); !strings.HasPrefix(out, "ERR ") {
		t.Errorf("full load of a 70 MiB expansion accepted")
	}
	if out := loadDump("bomb.yaml", b.String(), connSkip); strings.HasPrefix(out, "ERR ") {
		t.Errorf("connection-only load refused over its skipped jobs section (7b41a71 accepted it): %s", out)
	}
}
