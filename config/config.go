package config

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // every replica must use the same zone rules

	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/schedule"
)

// Config is a loaded, validated job list. Load and LoadFile return it only
// when every value is valid; all defaults are filled in.
type Config struct {
	// Redis is the queue Redis, and the lock master unless Locking.Masters
	// is set.
	Redis RedisConfig `yaml:"redis"`
	// Locking configures the lock masters and their safety margins.
	Locking LockingConfig `yaml:"locking"`
	// Namespace prefixes every Redis key baton writes ([a-z0-9_-]+, at most
	// 64 characters). Default "baton".
	Namespace string `yaml:"namespace"`
	// Timezone is the zone of jobs that name none. Default "UTC". "Local" is
	// rejected: replicas on hosts in different zones would disagree.
	Timezone string `yaml:"timezone"`
	// Location is Timezone loaded.
	Location *time.Location `yaml:"-"`
	// MaxClockSkew bounds the difference between a replica's clock and Redis
	// TIME; a replica beyond it stops claiming ticks. Default 500ms; > 0.
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
	// HTTP configures the metrics, health and API listener.
	HTTP HTTPConfig `yaml:"http"`
	// Worker configures the asynq worker.
	Worker WorkerConfig `yaml:"worker"`
	// Scheduler configures tick claiming and dispatch.
	Scheduler SchedulerConfig `yaml:"scheduler"`
	// Security configures the signing of what replicas hand each other
	// through Redis.
	Security SecurityConfig `yaml:"security"`
	// History bounds the run history kept in Redis.
	History HistoryConfig `yaml:"history"`
	// Schedules bounds the schedules made at runtime (see
	// DecodeSchedule).
	Schedules SchedulesConfig `yaml:"schedules"`
	// Calendars are named sets of days that jobs exclude or run only on
	// (Job.Exclude, Job.Only).
	Calendars map[string]*CalendarSpec `yaml:"calendars"`
	// Limits are named bounds on runs at once, cluster-wide, shared by the
	// jobs that name one (Job.Limit): at most N runs of all of them hold
	// a slot of the limit's semaphore at a time. 1..MaxLimit each.
	Limits map[string]int `yaml:"limits"`
	// Jobs is the job list, in file order.
	Jobs []Job `yaml:"jobs"`
	// File is the path the config was loaded from; empty for Load.
	File string `yaml:"-"`

	byName map[string]int // job name -> index in Jobs, built by Load
	// job name -> the indexes in Jobs of the jobs run after it, built by
	// Load (Children is asked at every tick's end)
	children map[string][]int
	secrets  *redact.Secrets // values that came from ${VAR}
	source   JobSource       // the runtime schedules Job also finds (WithSource)
	// the max_clock_skew the job list was checked with at Load; runtime
	// schedules are checked with it too (DecodeSchedule)
	loadedSkew time.Duration
}

// SecretValues returns the values that came from the environment through
// ${VAR} when the config was loaded. They are masked wherever baton prints
// the config or a job's errors and output; programs that log the config
// themselves mask them with MaskSecrets.
func (c *Config) SecretValues() []string { return c.secrets.Values() }

// MaskSecrets returns s with every value from SecretValues of at least 4
// bytes replaced by "xxxxx".
func (c *Config) MaskSecrets(s string) string { return c.secrets.Text(s) }

// SecretValues returns the values that came from the environment through
// ${VAR} anywhere in the config the job was loaded with: they are masked in
// the job's errors and output.
func (j *Job) SecretValues() []string { return j.secrets.Values() }

// MaskSecrets returns s with every value of SecretValues of at least 4 bytes
// replaced by "xxxxx".
func (j *Job) MaskSecrets(s string) string { return j.secrets.Text(s) }

// RedactedJob returns j as Redacted prints it in a config of its own (with
// c's namespace and time zone): equal definitions print alike, and secrets
// are masked.
func (c *Config) RedactedJob(j *Job) string {
	one := Config{Namespace: c.Namespace, Timezone: c.Timezone, Jobs: []Job{*j}, secrets: c.secrets}
	return one.Redacted()
}

// RedisConfig says how to reach the queue Redis. Exactly one of URL, Sentinel
// and Cluster is set.
type RedisConfig struct {
	// URL is a redis:// or rediss:// (TLS) URL, as go-redis ParseURL reads
	// it: redis://user:password@host:port/db?options.
	URL string `yaml:"url"`
	// Sentinel reaches a master through Redis Sentinel.
	Sentinel *SentinelConfig `yaml:"sentinel"`
	// Cluster reaches a Redis Cluster.
	Cluster *ClusterConfig `yaml:"cluster"`
	// TLS sets the certificates of TLS connections (rediss:// URLs, here
	// and in locking.masters, and sentinel or cluster with tls: true).
	TLS *TLSFiles `yaml:"tls"`
}

// TLSFiles are the PEM files of TLS connections to Redis. Without CAFile
// the system's roots verify the server.
type TLSFiles struct {
	// CAFile holds the CA certificates the server's must chain to.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client's certificate and key, for a
	// server that asks for one (tls-auth-clients). Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry; default:
	// the host connected to.
	ServerName string `yaml:"server_name"`
}

// SentinelConfig reaches a Redis master through Sentinel.
type SentinelConfig struct {
	// Master is the master's name as the sentinels know it. Required.
	Master string `yaml:"master"`
	// Addrs are the sentinels' host:port addresses. At least one.
	Addrs []string `yaml:"addrs"`
	// Username and Password authenticate to the master.
	Username string `yaml:"username"`
	// Password authenticates to the master. Never logged (see Redacted).
	Password string `yaml:"password"`
	// DB is the database number, >= 0.
	DB int `yaml:"db"`
	// TLS connects with TLS.
	TLS bool `yaml:"tls"`
}

// ClusterConfig reaches a Redis Cluster.
type ClusterConfig struct {
	// Addrs are seed nodes' host:port addresses. At least one.
	Addrs []string `yaml:"addrs"`
	// Username authenticates to the nodes.
	Username string `yaml:"username"`
	// Password authenticates to the nodes. Never logged (see Redacted).
	Password string `yaml:"password"`
	// TLS connects with TLS.
	TLS bool `yaml:"tls"`
}

// FollowerDelay is how long the replicas that are not a tick's preferred
// claimer wait before they look at it (the scheduler's default, which baton
// uses): a job's starting deadline must leave a follower room to take over
// a tick whose owner died.
const FollowerDelay = 500 * time.Millisecond

// LockingConfig configures the lock masters.
type LockingConfig struct {
	// Masters are redis:// URLs of independent masters that form a Redlock
	// quorum. Empty means Redis is the one master. Otherwise 1, 3, 5 or 7
	// distinct masters.
	Masters []string `yaml:"masters"`
	// Lateness is the fixed part of the validity safety margin
	// (margin = ttl/100 + Lateness). Default 10ms; >= 0.
	Lateness time.Duration `yaml:"lateness"`
	// RestartQuarantine is how long a master that restarted (empty, or from a
	// snapshot older than its last writes) grants nothing, counted from the
	// server's start. Default 1m; at least the longest lock TTL in use.
	RestartQuarantine time.Duration `yaml:"restart_quarantine"`
	// FreshDeployment lets lock masters that carry no trace of an earlier
	// life vote at once, as a brand-new deployment, instead of waiting out
	// the quarantine. Redis cannot tell that from every master having
	// restarted empty at once, when a live holder's lock may be granted
	// again; so when a config file sets it, every replica warns at every
	// start that restart safety is given up. Deprecated in files: `baton
	// init` marks a brand-new set of masters once instead. baton dev and
	// package batontest set it on their brand-new private servers.
	// Default false.
	FreshDeployment bool `yaml:"fresh_deployment"`

	freshInFile bool // FreshDeployment was set by the file
}

// FreshDeploymentInFile reports whether the config file itself set
// fresh_deployment: true (rather than a program, after loading it).
func (l LockingConfig) FreshDeploymentInFile() bool { return l.freshInFile }

// HTTPConfig configures baton's HTTP listener.
type HTTPConfig struct {
	// Listen is a host:port to serve /metrics, /healthz, /readyz, the API
	// and the dashboard on. Empty (the default) turns the listener off.
	Listen string `yaml:"listen"`
	// Token is the bearer token that the API (reads of /api/* too, unless
	// PublicReads) and the queue view (/queues) require: at least 16
	// bytes; write it as ${VAR} so it stays out of the file. Empty (the
	// default): calls that change something and the queue view are
	// refused; reading status, history and locks needs no token.
	Token string `yaml:"token"`
	// PublicReads lets the API's reads (status, history, locks) answer
	// without Token when one is set; changes still need it. Default
	// false: with a token, every /api/ call needs it.
	PublicReads bool `yaml:"public_reads"`
	// Hosts are the names the listener answers to besides IP addresses,
	// localhost and *.localhost: a request whose Host header names
	// anything else is refused (421), so that a web page whose DNS name
	// was rebound to baton's address cannot read or call it through a
	// browser. Each is a DNS name ("baton.internal"), or "*." and one
	// ("*.example.com": every name under example.com); no scheme, no
	// port. /healthz and /readyz answer any Host (probes). Default none.
	Hosts []string `yaml:"hosts"`
}

// MinHTTPToken is the shortest http.token accepted, in bytes.
const MinHTTPToken = 16

// SecurityConfig says how replicas authenticate what they hand each other
// through Redis: task payloads and replace requests carry an HMAC-SHA256
// signature, and a worker runs nothing a key of its own did not sign. A
// writer to Redis without the key can then neither enqueue a run nor stop
// one.
type SecurityConfig struct {
	// SigningKeys are the HMAC keys (at least 32 bytes each; at most two;
	// empty entries are dropped, so "${KEY_OLD:-}" can stand for a key that
	// is not set, and a list of empty entries is no keys). The first signs; every one verifies. To rotate: add the
	// new key second on every replica, then move it first, then drop the
	// old one. Without keys nothing is signed, and baton says so at start.
	SigningKeys []string `yaml:"signing_keys"`
	// AcceptUnsigned makes workers with keys also run unsigned tasks and
	// replace requests: for the rolling deploy that introduces signing
	// (replicas without keys still send unsigned ones). Default false.
	AcceptUnsigned bool `yaml:"accept_unsigned"`
}

// HistoryConfig bounds the run history and tick ledger each job keeps in the
// queue Redis: what was dispatched, by which replica, where and when it ran,
// how it ended, and the ticks that did not run and why (`baton history`).
type HistoryConfig struct {
	// Runs is how many runs (and not-run ticks) of each job are kept, the
	// newest. Default 100; 0 keeps no history; at most 100000.
	Runs int `yaml:"runs"`
	// MaxAge drops entries older than this (by Redis's clock). Default 168h
	// (7 days); >= 1m.
	MaxAge time.Duration `yaml:"max_age"`
	// StartAfter is how long a run goes before its start is written on its
	// own: a run that ends sooner leaves one entry, written with its end
	// (one script call a run instead of two); a longer one shows as running
	// from then on. The price: an attempt whose worker dies within it
	// leaves no record (the ledger shows its tick dispatched, not run), and
	// a run shorter than it never shows as running in the history (status
	// shows a job under a lease running from its lease). Default 0: every
	// start is written as the run starts, so a worker killed mid-run leaves
	// a record that its attempt started. 0 to 1h.
	StartAfter time.Duration `yaml:"start_after"`
}

// WorkerConfig configures the asynq worker that runs cron-mode jobs.
type WorkerConfig struct {
	// Concurrency is the number of tasks run at once. Default 10; >= 1.
	Concurrency int `yaml:"concurrency"`
	// Queues maps asynq queue names to priority weights (>= 1). Default
	// {default: 1}. Setting it replaces the default map.
	Queues map[string]int `yaml:"queues"`
	// Lanes spreads the tasks of each queue over this many asynq queues,
	// each in a hash slot of its own, so that a Redis Cluster spreads the
	// queue over its primaries; a worker takes from every lane with the
	// queue's weight, and a job's tasks always go to the same lane. Every
	// replica of a namespace must say the same: `baton init` records it
	// in Redis, and a replica whose config says otherwise refuses to
	// start. Default 1; 1..1024.
	Lanes int `yaml:"lanes"`
	// ShutdownGrace is how long running tasks get to finish on shutdown.
	// Default 30s; > 0.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// PollInterval is how often an idle worker asks its queues for tasks:
	// the most a dispatched run waits for a worker to notice it, traded
	// against Redis commands while idle (about 12 per second per queue at
	// 100ms). Default 100ms; 10ms to 10s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// ExecCgroup is where each exec run gets a cgroup v2 of its own, so
	// that every process it started is killed when it ends, also one that
	// left its process group, renamed itself and cleared its environment:
	// ExecCgroupAuto (the default) below the cgroup baton runs in, where
	// baton may write (under systemd: Delegate=yes); ExecCgroupOff for
	// none; or the absolute path of a cgroup v2 directory. Where runs can
	// get none, they run without, and baton logs one line at start saying
	// what then escapes. Every exec run of the replica, whatever its mode.
	ExecCgroup string `yaml:"exec_cgroup"`
}

// Values of WorkerConfig.ExecCgroup besides a directory.
const (
	ExecCgroupAuto = "auto"
	ExecCgroupOff  = "off"
)

// SchedulerConfig configures tick claiming and dispatch.
type SchedulerConfig struct {
	// TickLeaseTTL is the TTL of the per-tick dispatch lease. Default 5s;
	// >= 100ms.
	TickLeaseTTL time.Duration `yaml:"tick_lease_ttl"`
	// RetentionMargin is added to the asynq Retention of every task (see
	// Config.Retention). Default 1m; >= 0.
	RetentionMargin time.Duration `yaml:"retention_margin"`
	// MaxTickRecords bounds the tick records (and retained asynq tasks) one
	// job may keep: the most ticks its schedule has within one retention
	// span (Config.Retention), over the next 8 days. A job that would keep
	// more is refused. Default 10000; >= 1.
	MaxTickRecords int `yaml:"max_tick_records"`
}

// Mode says where a job runs.
type Mode string

// The job modes.
const (
	// ModeCron dispatches each tick into the asynq queue; any worker runs it.
	ModeCron Mode = "cron"
	// ModeLocal runs each tick in-process on the scheduler replica that
	// claimed it, under the job's execution lease: leader-style maintenance without
	// a queue.
	ModeLocal Mode = "local"
	// ModeSingleton runs one long-lived instance cluster-wide, restarted
	// with RestartBackoff when it exits.
	ModeSingleton Mode = "singleton"
)

func (m Mode) valid() bool {
	return m == ModeCron || m == ModeLocal || m == ModeSingleton
}

// Concurrency says what happens when a tick is due while an earlier
// execution of the same job still runs.
type Concurrency string

// The concurrency policies.
const (
	// ConcurrencyForbid skips the new execution (recorded as skipped).
	ConcurrencyForbid Concurrency = "forbid"
	// ConcurrencyAllow runs both.
	ConcurrencyAllow Concurrency = "allow"
	// ConcurrencyReplace stops the old execution before the new one starts.
	ConcurrencyReplace Concurrency = "replace"
	// ConcurrencyBufferOne keeps one tick that finds the job running and
	// runs it when the run ends; ticks due while one is kept are recorded
	// as dropped.
	ConcurrencyBufferOne Concurrency = "buffer_one"
	// ConcurrencyBufferAll keeps up to BufferMax such ticks and runs them
	// one after the other, oldest first; ticks beyond the bound are
	// recorded as dropped.
	ConcurrencyBufferAll Concurrency = "buffer_all"
)

func (c Concurrency) valid() bool {
	return c == ConcurrencyForbid || c == ConcurrencyAllow || c == ConcurrencyReplace || c.Buffers()
}

// Buffers reports whether c keeps ticks that find the job running
// (buffer_one, buffer_all).
func (c Concurrency) Buffers() bool {
	return c == ConcurrencyBufferOne || c == ConcurrencyBufferAll
}

// Catchup says which ticks missed while no replica was running are
// dispatched afterwards (always only within StartingDeadline): the one type
// of package schedule.
type Catchup = schedule.Catchup

// DST is a job's policy on the days its zone's clocks change (schedule.DST).
type DST = schedule.DST

// The catch-up policies.
const (
	// CatchupSkip dispatches none of the missed ticks.
	CatchupSkip = schedule.CatchupSkip
	// CatchupLatest dispatches the most recent missed tick.
	CatchupLatest = schedule.CatchupLatest
	// CatchupAll dispatches every missed tick, oldest first, at most
	// CatchupMax of them (the most recent ones).
	CatchupAll = schedule.CatchupAll
)

// Job is one entry of the job list.
type Job struct {
	// Name identifies the job: unique, ^[a-z0-9._-]{1,64}$ but not "." or
	// "..", so that it is a URL path segment as it is (the HTTP API's
	// /api/jobs/NAME).
	Name string `yaml:"name"`
	// Schedule is a cron spec: 5 fields (minute resolution), 6 fields (with
	// seconds first), a descriptor (@yearly, @annually, @monthly, @weekly,
	// @daily, @midnight, @hourly) or "@every <duration>" (whole seconds,
	// >= 1s, aligned to the Unix epoch). Required unless Mode is singleton,
	// forbidden then. It is read in Location with schedule.Parse
	// (Vixie-cron DST rules).
	Schedule string `yaml:"schedule"`
	// Hashed is Schedule with each H replaced by the value it stands for
	// in this job (schedule.Hashed of the job's name: a runtime schedule's
	// is "@ID"); empty when Schedule has no H.
	Hashed string `yaml:"-"`
	// Exclude names calendars (Config.Calendars) on whose days the job has
	// no tick: a tick on such a day is not due (not missed).
	Exclude []string `yaml:"exclude"`
	// Only names calendars the job's ticks must all fall within: a tick on
	// a day missing from one of them is not due.
	Only []string `yaml:"only"`
	// Calendars are the calendars Exclude and Only name, by name, as the
	// job was decoded with them: the job list's, and for a runtime
	// schedule those put at runtime too (Config.WithCalendars).
	Calendars map[string]*schedule.Calendar `yaml:"-"`
	// Unfiltered is Sched without Exclude and Only (nil when they name no
	// calendar): what baton next shows removed.
	Unfiltered schedule.Schedule `yaml:"-"`
	// Sched is Schedule parsed in Location by schedule.Parse; nil
	// for singleton jobs.
	Sched schedule.Schedule `yaml:"-"`
	// Timezone is the zone Schedule is read in. After loading it is set for
	// every job with a schedule: empty in the file means Config.Timezone.
	// Singleton jobs have neither schedule nor zone.
	Timezone string `yaml:"timezone"`
	// Location is Timezone loaded; nil for singleton jobs.
	Location *time.Location `yaml:"-"`
	// Created is when a runtime schedule's id was first put (by Redis's
	// clock; DecodeSchedule): it has no scheduled tick before it. Zero for
	// the job list's jobs.
	Created time.Time `yaml:"-"`
	// Ref names the runtime schedule definition this job was decoded
	// from (set by whoever read the stored record, not by DecodeSchedule):
	// a tick's task carries it, so that a worker runs the tick with that
	// definition. Zero for the job list's jobs.
	Ref ScheduleRef `yaml:"-"`
	// Start and End bound the job's ticks: none before Start, none after
	// End (RFC 3339 times; empty: open). Sched is already restricted to
	// them. Not for singletons.
	Start string `yaml:"start"`
	End   string `yaml:"end"`
	// At makes the job a one-shot: a single tick at this RFC 3339 time
	// (whole seconds), instead of Schedule. Not for singletons.
	At string `yaml:"at"`
	// MaxRuns stops the job after this many dispatched ticks, counted
	// across replicas and restarts on the queue Redis (manual triggers do
	// not count). 0: no limit. Not for singletons.
	MaxRuns int `yaml:"max_runs"`
	// Mode says where the job runs. Default cron.
	Mode Mode `yaml:"mode"`
	// Exec runs a command. Exactly one of Exec, HTTP and Handler is set.
	Exec *ExecSpec `yaml:"exec"`
	// HTTP sends a request. Not allowed for singleton jobs.
	HTTP *HTTPSpec `yaml:"http"`
	// Handler calls a Go handler registered by name.
	Handler *HandlerSpec `yaml:"handler"`
	// Concurrency is the overlap policy. Default forbid. Not for singletons.
	Concurrency Concurrency `yaml:"concurrency"`
	// After names the jobs this one runs after (a chain): it has no
	// schedule of its own, and ticks once per tick of its parents, each
	// run waiting until every parent with a tick at that instant ended it
	// (OnParentFailure says what a parent's failure does). Job list jobs,
	// not singletons; no cycles.
	After []string `yaml:"after"`
	// OnParentFailure is what a tick does whose parent's tick did not
	// succeed: skip (the default: recorded skipped, naming the parent) or
	// run. Only with After.
	OnParentFailure ParentFailure `yaml:"on_parent_failure"`
	// Limit names a limit (Config.Limits) the job's runs share with every
	// job naming it: a run starts once it holds one of its slots, waiting
	// for one up to the tick's starting deadline (then the tick is
	// skipped). Not for singletons.
	Limit string `yaml:"limit"`
	// BufferMax bounds the ticks a buffer_all job keeps waiting while it
	// runs. Default 10; 1..100; read by buffer_all only (buffer_one keeps one).
	BufferMax int `yaml:"buffer_max"`
	// Timeout bounds one execution. Default 1h for cron and local jobs; for
	// singleton jobs the default is 0, meaning no limit (a set Timeout stops
	// and restarts the singleton after that long).
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetry is how often a failed execution is retried. Default 3; >= 0.
	// Cron mode only (a queue concept).
	MaxRetry int `yaml:"max_retry"`
	// RetryBackoff is the delay before a retry. Default 10s; >= 0. Cron mode
	// only.
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// Queue is the asynq queue, a key of Worker.Queues. Default "default".
	// Cron mode only.
	Queue string `yaml:"queue"`
	// StartingDeadline is how late a tick may still be dispatched. Default
	// 1m; > 0. Not for singletons.
	StartingDeadline time.Duration `yaml:"starting_deadline"`
	// DST is how Schedule meets a wall time a spring-forward skips and one
	// a fall-back repeats: vixie (the default: fixed-time specs run a
	// skipped time at the jump and a repeated one once, others follow
	// absolute time), once, skip or both (schedule.DST). Not for @every,
	// at or singletons.
	DST DST `yaml:"dst"`
	// Catchup is the policy for ticks missed while no replica ran. Default
	// latest. Not for singletons.
	Catchup Catchup `yaml:"catchup"`
	// CatchupMax caps the ticks Catchup all dispatches. Default 10; 1..1000.
	CatchupMax int `yaml:"catchup_max"`
	// Jitter delays each dispatch by a random duration in [0, Jitter).
	// Default 0; shorter than the schedule's shortest interval. Not for
	// singletons.
	Jitter time.Duration `yaml:"jitter"`
	// LockTTL is the TTL of the execution lease (auto-extended while the
	// job runs) and of the singleton lease. Default 30s; >= 1s.
	LockTTL time.Duration `yaml:"lock_ttl"`
	// RestartBackoff is the delay before a singleton is restarted after it
	// exits, doubling from Initial to Max. Singleton jobs only. Default
	// {initial: 1s, max: 1m}.
	RestartBackoff Backoff `yaml:"restart_backoff"`
	// Leader pins a local-mode job to the cluster leader instead of the
	// replica that claimed the tick. Local mode only.
	Leader bool `yaml:"leader"`
	// Paused starts the job paused. The pause flag lives in Redis; this is
	// its initial value when the job is first seen.
	Paused bool `yaml:"paused"`
	// Line is the line of the job's entry in the file.
	Line int `yaml:"-"`

	secrets *redact.Secrets // the config's ${VAR} values, masked in errors and output
}

// ExecSpec runs a command.
type ExecSpec struct {
	// Command is the argv; no shell is involved unless it names one.
	// Non-empty.
	Command []string `yaml:"command"`
	// Env is added to the command's environment. Keys starting with BATON_
	// are reserved for the run's identity (BATON_JOB, BATON_TICK, ...).
	Env map[string]string `yaml:"env"`
	// Dir is the working directory; empty means baton's.
	Dir string `yaml:"dir"`
	// InheritEnv names more of baton's environment variables the command
	// gets (a name, a prefix ending in "*", or "*" for all). It always gets
	// PATH, HOME, LANG, LC_*, TZ and USER, then Env, then the run's
	// identity; nothing else of baton's environment (which may hold a Redis
	// password).
	InheritEnv []string `yaml:"inherit_env"`
}

// HTTPSpec sends an HTTP request.
type HTTPSpec struct {
	// Method is the request method, upper case. Default GET.
	Method string `yaml:"method"`
	// URL is an absolute http or https URL.
	URL string `yaml:"url"`
	// Headers are added to the request. X-Baton-* names are reserved.
	Headers map[string]string `yaml:"headers"`
	// Body is the request body.
	Body string `yaml:"body"`
	// ExpectStatus lists the status codes that count as success (each
	// 100..599). Empty (the default) means any 2xx.
	ExpectStatus []int `yaml:"expect_status"`
}

// HandlerSpec calls a Go handler registered by name.
type HandlerSpec struct {
	// Name is the handler's registered name: [a-z0-9._-]{1,64}.
	Name string `yaml:"name"`
	// Payload is the YAML value under payload, converted to JSON (mapping
	// keys must be strings). Nil when the file has no payload.
	Payload json.RawMessage `yaml:"payload"`
}

// Backoff is an exponential delay: Initial, doubling up to Max.
type Backoff struct {
	// Initial is the first delay; > 0.
	Initial time.Duration `yaml:"initial"`
	// Max caps the delay; >= Initial.
	Max time.Duration `yaml:"max"`
}

// Defaults.
const (
	defaultNamespace = "baton"
	defaultTimezone  = "UTC"
	defaultQueue     = "default"
)

// defaultConfig is where every Load starts.
func defaultConfig() Config {
	return Config{
		Locking: LockingConfig{
			Lateness:          10 * time.Millisecond,
			RestartQuarantine: time.Minute,
		},
		Namespace:    defaultNamespace,
		Timezone:     defaultTimezone,
		MaxClockSkew: 500 * time.Millisecond,
		Worker: WorkerConfig{
			Concurrency:   10,
			Queues:        map[string]int{defaultQueue: 1},
			Lanes:         1,
			ShutdownGrace: 30 * time.Second,
			PollInterval:  100 * time.Millisecond,
			ExecCgroup:    ExecCgroupAuto,
		},
		Scheduler: SchedulerConfig{
			TickLeaseTTL:    5 * time.Second,
			RetentionMargin: time.Minute,
			MaxTickRecords:  10000,
		},
		History:   HistoryConfig{Runs: 100, MaxAge: 7 * 24 * time.Hour},
		Schedules: SchedulesConfig{MaxPayload: 16 << 10, History: 3, Resync: 5 * time.Minute, Shards: 1},
	}
}

// applyDefaults is called on every job entry before it is decoded.
func (j *Job) applyDefaults() {
	*j = Job{
		Mode:             ModeCron,
		Concurrency:      ConcurrencyForbid,
		Timeout:          time.Hour,
		MaxRetry:         3,
		RetryBackoff:     10 * time.Second,
		Queue:            defaultQueue,
		StartingDeadline: time.Minute,
		Catchup:          CatchupLatest,
		CatchupMax:       10,
		BufferMax:        10,
		LockTTL:          30 * time.Second,
		RestartBackoff:   Backoff{Initial: time.Second, Max: time.Minute},
	}
}

// BufferBound is how many ticks the job keeps waiting while it runs: 1 for
// buffer_one, BufferMax for buffer_all, 0 for the other policies.
func (j *Job) BufferBound() int {
	switch j.Concurrency {
	case ConcurrencyBufferOne:
		return 1
	case ConcurrencyBufferAll:
		return j.BufferMax
	}
	return 0
}

// Kind returns "exec", "http" or "handler": which of the job's specs is set.
func (j *Job) Kind() string {
	switch {
	case j.Exec != nil:
		return "exec"
	case j.HTTP != nil:
		return "http"
	case j.Handler != nil:
		return "handler"
	}
	return ""
}

// Job returns the job with the given name: a job of the list, or a
// runtime schedule (a name IsScheduleJob says is one) that the config's
// source (WithSource) holds.
func (c *Config) Job(name string) (*Job, bool) {
	if IsScheduleJob(name) {
		if c.source == nil {
			return nil, false
		}
		return c.source.ScheduleJob(name)
	}
	if i, ok := c.byName[name]; ok && i < len(c.Jobs) && c.Jobs[i].Name == name {
		return &c.Jobs[i], true
	}
	for i := range c.Jobs { // a Config built or changed by hand
		if c.Jobs[i].Name == name {
			return &c.Jobs[i], true
		}
	}
	return nil, false
}

// maxRetention is the longest asynq Retention a config may imply (see
// Config.Retention).
const maxRetention = 7 * 24 * time.Hour

// Retention returns the asynq Retention for j's tasks: j.StartingDeadline +
// Scheduler.TickLeaseTTL + 2*MaxClockSkew + Scheduler.RetentionMargin. asynq
// remembers a task ID only while the task exists, so a completed task must
// outlive every moment at which some replica could still try to dispatch the
// same tick; the retained task is what turns that late attempt into a
// duplicate-ID no-op. Validation keeps it at most maxRetention.
func (c *Config) Retention(j *Job) time.Duration {
	return j.StartingDeadline + c.Scheduler.TickLeaseTTL + 2*c.MaxClockSkew + c.Scheduler.RetentionMargin
}

// FieldError is one problem in a config file.
type FieldError struct {
	// File is the file's path, "<input>" for Load.
	File string
	// Line is the 1-based line of the offending value, or 0 if unknown.
	Line int
	// Job is the name of the job the problem belongs to, or empty.
	Job string
	// Field is the key path, relative to the job if Job is set
	// ("exec.command", "redis.url", "jobs[3].name").
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error formats e as `file:line: job "name": field: msg`, leaving out the
// parts that are empty.
func (e FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Job != "" {
		fmt.Fprintf(&b, "job %q: ", e.Job)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Error is returned by Load and LoadFile for a file that is not a
// valid config. It lists every problem found, ordered by line.
type Error struct {
	// Errors are the problems, at least one.
	Errors []FieldError
}

// Error returns one line per problem.
func (e *Error) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as errors, so errors.As finds a FieldError.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		errs[i] = fe
	}
	return errs
}

// Load parses and validates a config from YAML. Errors are reported against
// the file name "<input>". On any problem it returns (nil, *Error)
// listing all of them; data above MaxFileSize is refused undecoded.
//
// Scalar values may use ${VAR}, replaced by the environment variable VAR (an
// error if VAR is unset), and ${VAR:-default}, replaced by default when VAR
// is unset or empty. $$ stands for a literal $. A bare $VAR is left as it is,
// so shell variables in commands survive. A value that is empty after
// expansion counts as absent: its default applies. Mapping keys are never
// expanded.
//
// Unknown keys are errors, except top-level keys starting with "x-", which
// are ignored and can hold YAML anchors (merge keys "<<" are supported).
func Load(data []byte) (*Config, error) {
	return load(data, "<input>", "", os.LookupEnv, time.Now())
}

// LoadFile reads and loads the config at path, as Load does; errors name
// path. A file that cannot be read gives the *fs.PathError of os.ReadFile,
// wrapped ("config: open ..."); a file above MaxFileSize an *Error,
// without reading it past the bound.
func LoadFile(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return load(data, path, path, os.LookupEnv, time.Now())
}

// MaxFileSize is the largest config accepted, in bytes: 16 MiB, some
// thousand times a large job list. A larger one is refused before it is
// decoded (YAML takes several times a document's size in memory to
// decode it).
const MaxFileSize = 16 << 20

// readFile reads the config at path: the error of os.ReadFile wrapped
// ("config: open ..."), or an *Error for a file above MaxFileSize, which
// is not read past the bound.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileSize {
		return nil, tooLarge(path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge(path, -1)
	}
	return data, nil
}

// tooLarge is the error for a config of size bytes (-1: not known) above
// MaxFileSize.
func tooLarge(file string, size int64) error {
	is := fmt.Sprintf("more than %d MiB", MaxFileSize>>20)
	if size >= 0 {
		is = fmt.Sprintf("%d bytes (%.1f MiB)", size, float64(size)/(1<<20))
	}
	return &Error{Errors: []FieldError{{File: file,
		Msg: fmt.Sprintf("the file is %s, above the bound of %d MiB (%d bytes) for a config: it is refused before it is decoded", is, MaxFileSize>>20, MaxFileSize)}}}
}

// LoadConnectionFile reads the config at path as LoadFile does, but only
// what reaching Redis takes: the redis, locking and namespace sections (and
// the x- keys, which may hold anchors). The jobs and the other known
// sections are not read: their ${VAR}s need not be set, and their problems
// are not reported (unknown top-level keys still are). The result has no
// jobs and the other sections' defaults. For `baton lock` on a host (a crontab)
// that shares the replicas' config but not their environment.
func LoadConnectionFile(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return loadSections(data, path, path, os.LookupEnv, time.Now(),
		[]string{"jobs", "worker", "scheduler", "http", "security", "timezone", "max_clock_skew"})
}
