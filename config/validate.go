package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/childenv"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/redisurl/syntax"
	"github.com/batonhq/baton/internal/strictyaml"
	"github.com/batonhq/baton/schedule"
)

var (
	jobNameRE     = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)
	namespaceRE   = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	queueNameRE   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	httpMethodRE  = regexp.MustCompile(`^[A-Z]+$`)
	headerNameRE  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	envNameCharRE = regexp.MustCompile(`^[^=\x00]+$`)
)

// validator checks a decoded config and fills in derived values (locations,
// HTTP method, job lines). It reports through the decoder, whose key-path to
// line map says where each value was written.
type validator struct {
	*decoder
	cfg     *Config
	now     time.Time
	runtime bool // checking a runtime schedule or calendar (DecodeSchedule, DecodeCalendar)
}

// errf records a problem at path, on the line of path or of its nearest
// ancestor that was written in the file.
func (v *validator) errf(path, format string, args ...any) {
	v.add(v.lineOf(path), path, format, args...)
}

func (v *validator) lineOf(path string) int { return v.LineOf(path) }

// shownURL returns the URL at path as a message may show it: its
// password masked, and every part that came from ${VAR} too.
func (v *validator) shownURL(path, raw string) string {
	if e, ok := v.fromEnv[path]; ok {
		raw = e.masked
	}
	return redact.URL(raw)
}

// set reports whether path was given in the file.
func (v *validator) set(path string) bool {
	_, ok := v.Line(path)
	return ok
}

// MinSigningKey is the shortest signing key accepted, in bytes.
const MinSigningKey = 32

// security checks the signing keys and drops empty entries; a list whose
// entries are all empty ("${KEY:-}" unset) is no keys.
func (v *validator) security() {
	s := &v.cfg.Security
	if len(s.SigningKeys) == 0 {
		if s.AcceptUnsigned {
			v.errf("security.accept_unsigned", "only means something with security.signing_keys (without keys nothing is signed or checked)")
		}
		return
	}
	var keys []string
	for i, k := range s.SigningKeys {
		switch {
		case k == "":
			continue
		case len(k) < MinSigningKey:
			v.errf(fmt.Sprintf("security.signing_keys[%d]", i), "a key of %d bytes is too short: use at least %d random bytes (e.g. openssl rand -base64 48)", len(k), MinSigningKey)
		case slices.Contains(keys, k):
			v.errf(fmt.Sprintf("security.signing_keys[%d]", i), "the same key twice")
		}
		keys = append(keys, k)
	}
	if len(keys) > 2 {
		v.errf("security.signing_keys", "%d keys: at most two (the signing key and, while rotating, one more that verifies)", len(keys))
	}
	s.SigningKeys = keys // every entry empty: none, unsigned (baton warns at start)
	if len(keys) == 0 && s.AcceptUnsigned {
		v.errf("security.accept_unsigned", "only means something with security.signing_keys (every key is empty)")
	}
}

func (v *validator) validate() {
	c := v.cfg
	v.redis()
	v.locking()
	if !namespaceRE.MatchString(c.Namespace) {
		v.errf("namespace", "invalid namespace %q: use 1 to 64 of a-z, 0-9, '_', '-'", c.Namespace)
	}
	if c.Timezone == "" {
		c.Timezone = defaultTimezone
	}
	if loc, err := loadZone(c.Timezone); err != nil {
		v.errf("timezone", "%s", err.Error())
	} else {
		c.Location = loc
	}
	if c.MaxClockSkew <= 0 {
		v.errf("max_clock_skew", "must be > 0, got %s", c.MaxClockSkew)
	}
	if c.HTTP.Listen != "" {
		if err := checkHostPort(c.HTTP.Listen); err != nil {
			v.errf("http.listen", "%s (want host:port, e.g. 127.0.0.1:8080, a loopback address unless the endpoints must be reached from elsewhere; empty turns the listener off)", err.Error())
		}
	}
	if t := c.HTTP.Token; t != "" && len(t) < MinHTTPToken {
		v.errf("http.token", "is %d bytes, want at least %d (e.g. head -c 24 /dev/urandom | base64)", len(t), MinHTTPToken)
	}
	if c.HTTP.PublicReads && c.HTTP.Token == "" {
		v.errf("http.public_reads", "only means something with http.token (without a token, reads need none)")
	}
	v.httpHosts()
	v.worker()
	v.history()
	v.schedules()
	v.security()
	if c.Scheduler.TickLeaseTTL < 100*time.Millisecond {
		v.errf("scheduler.tick_lease_ttl", "must be at least 100ms, got %s", c.Scheduler.TickLeaseTTL)
	}
	if c.Scheduler.MaxTickRecords < 1 {
		v.errf("scheduler.max_tick_records", "must be >= 1, got %d", c.Scheduler.MaxTickRecords)
	}
	if c.Scheduler.RetentionMargin < 0 {
		v.errf("scheduler.retention_margin", "must be >= 0, got %s", c.Scheduler.RetentionMargin)
	}
	v.calendars()
	v.limits()
	firstLine := map[string]int{}
	for i := range c.Jobs {
		j := &c.Jobs[i]
		p := fmt.Sprintf("jobs[%d]", i)
		j.Line, _ = v.Line(p)
		if j.Name != "" {
			if line, dup := firstLine[j.Name]; dup {
				v.errf(p+".name", "duplicate job name %q (first defined at line %d)", j.Name, line)
			} else {
				firstLine[j.Name] = j.Line
			}
		}
		v.job(p, j)
	}
	byName := make(map[string]*Job, len(c.Jobs))
	paths := make(map[*Job]string, len(c.Jobs))
	for i := range c.Jobs {
		j := &c.Jobs[i]
		if _, dup := byName[j.Name]; !dup && j.Name != "" {
			byName[j.Name] = j
		}
		paths[j] = fmt.Sprintf("jobs[%d]", i)
	}
	v.chains(byName, paths)
	v.quarantine()
}

func (v *validator) redis() {
	r := &v.cfg.Redis
	var kinds []string
	if r.URL != "" {
		kinds = append(kinds, "url")
		if _, err := checkRedisURL(r.URL, v.shownURL("redis.url", r.URL)); err != nil {
			v.errf("redis.url", "%s", err.Error())
		}
	}
	if s := r.Sentinel; s != nil {
		kinds = append(kinds, "sentinel")
		if s.Master == "" {
			v.errf("redis.sentinel.master", "required: the master's name as the sentinels know it")
		}
		v.addrs("redis.sentinel.addrs", s.Addrs)
		if s.DB < 0 {
			v.errf("redis.sentinel.db", "must be >= 0, got %d", s.DB)
		}
	}
	if cl := r.Cluster; cl != nil {
		kinds = append(kinds, "cluster")
		v.addrs("redis.cluster.addrs", cl.Addrs)
	}
	if r.TLS != nil {
		if _, err := r.TLS.Load(); err != nil {
			v.errf("redis.tls", "%s", err.Error())
		}
	}
	switch len(kinds) {
	case 0:
		v.errf("redis", "required: set one of url, sentinel or cluster")
	case 1:
	default:
		v.errf("redis."+kinds[1], "set only one of url, sentinel or cluster, found %s", strings.Join(kinds, " and "))
	}
}

func (v *validator) addrs(path string, addrs []string) {
	if len(addrs) == 0 {
		v.errf(path, "required: at least one host:port")
	}
	for i, a := range addrs {
		if err := checkHostPort(a); err != nil {
			v.errf(fmt.Sprintf("%s[%d]", path, i), "%s (want host:port)", err.Error())
		}
	}
}

func (v *validator) locking() {
	l := &v.cfg.Locking
	switch n := len(l.Masters); {
	case n == 0, n == 1, n == 3, n == 5, n == 7:
	case n%2 == 0:
		v.errf("locking.masters", "%d masters: use 1, 3, 5 or 7. With an even number a quorum needs %d of %d, which tolerates no more failed masters than %d would, and split votes become possible", n, n/2+1, n, n-1)
	default:
		v.errf("locking.masters", "%d masters: use 1, 3, 5 or 7 (more adds latency, not safety)", n)
	}
	seen := map[string]int{}
	for i, m := range l.Masters {
		p := fmt.Sprintf("locking.masters[%d]", i)
		t, err := checkRedisURL(m, v.shownURL(p, m))
		if err != nil {
			v.errf(p, "%s", err.Error())
			continue
		}
		id := fmt.Sprintf("%s/%d", t.Addr, t.DB)
		if first, dup := seen[id]; dup {
			v.errf(p, "the same master as masters[%d] (%q): a quorum needs independent masters", first, id)
			continue
		}
		seen[id] = i
	}
	if l.Lateness < 0 {
		v.errf("locking.lateness", "must be >= 0, got %s", l.Lateness)
	}
	if l.RestartQuarantine <= 0 {
		v.errf("locking.restart_quarantine", "must be > 0, got %s (baton init skips it for a brand-new set of masters)", l.RestartQuarantine)
	}
}

// quarantine checks that a master that restarted stays out of every lock
// for longer than any lock it may have held could still be valid.
func (v *validator) quarantine() {
	l := &v.cfg.Locking
	if l.RestartQuarantine <= 0 {
		return // reported by locking()
	}
	// the cluster-leader election holds a lease of twice the tick lease
	longest, what := 2*v.cfg.Scheduler.TickLeaseTTL, "the cluster-leader election, 2 x scheduler.tick_lease_ttl"
	for i := range v.cfg.Jobs {
		if j := &v.cfg.Jobs[i]; j.LockTTL > longest {
			longest, what = j.LockTTL, fmt.Sprintf("lock_ttl of job %q", j.Name)
		}
	}
	if l.RestartQuarantine < longest {
		v.errf("locking.restart_quarantine", "%s is shorter than the longest lock TTL (%s, %s): a master that restarted could grant a lock that is still held", formatDuration(l.RestartQuarantine), formatDuration(longest), what)
	}
}

func (v *validator) worker() {
	w := &v.cfg.Worker
	if w.Concurrency < 1 {
		v.errf("worker.concurrency", "must be >= 1, got %d", w.Concurrency)
	}
	if len(w.Queues) == 0 {
		v.errf("worker.queues", "required: at least one queue (default: {default: 1})")
	}
	for _, name := range slices.Sorted(mapKeys(w.Queues)) {
		p := strictyaml.JoinPath("worker.queues", name)
		if !queueNameRE.MatchString(name) {
			v.errf(p, "invalid queue name %q: use 1 to 64 of A-Z, a-z, 0-9, '.', '_', ':', '-'", name)
		}
		if w.Queues[name] < 1 {
			v.errf(p, "priority weight must be >= 1, got %d", w.Queues[name])
		}
	}
	if w.Lanes < 1 || w.Lanes > MaxShards {
		v.errf("worker.lanes", "must be between 1 and %d, got %d", MaxShards, w.Lanes)
	}
	if w.ShutdownGrace <= 0 {
		v.errf("worker.shutdown_grace", "must be > 0, got %s", w.ShutdownGrace)
	}
	if w.PollInterval < 10*time.Millisecond || w.PollInterval > 10*time.Second {
		v.errf("worker.poll_interval", "must be between 10ms and 10s, got %s", formatDuration(w.PollInterval))
	}
	if c := w.ExecCgroup; c != ExecCgroupAuto && c != ExecCgroupOff && !path.IsAbs(c) {
		v.errf("worker.exec_cgroup", "must be %s, %s or the absolute path of a cgroup v2 directory, got %q", ExecCgroupAuto, ExecCgroupOff, c)
	}
}

func (v *validator) history() {
	h := &v.cfg.History
	if h.Runs < 0 || h.Runs > 100000 {
		v.errf("history.runs", "must be between 0 (no history) and 100000, got %d", h.Runs)
	}
	if h.MaxAge < time.Minute {
		v.errf("history.max_age", "must be >= 1m, got %s", formatDuration(h.MaxAge))
	}
	if h.StartAfter < 0 || h.StartAfter > time.Hour {
		v.errf("history.start_after", "must be between 0 (every start written as the run starts) and 1h, got %s", formatDuration(h.StartAfter))
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Keys that mean nothing for some modes.
var (
	scheduleKeys = []string{"schedule", "timezone", "dst", "exclude", "only", "catchup", "catchup_max", "jitter", "starting_deadline", "at", "max_runs"}
	queueKeys    = []string{"queue", "max_retry", "retry_backoff"}
)

func (v *validator) job(p string, j *Job) {
	v.jobName(p, j)
	v.jobBody(p, j)
}

// jobName checks the name of a job of the list.
func (v *validator) jobName(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	switch {
	case j.Name == "":
		v.errf(at("name"), "required")
	case !jobNameRE.MatchString(j.Name):
		v.errf(at("name"), "invalid name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", j.Name)
	case j.Name == "." || j.Name == "..":
		v.errf(at("name"), `invalid name %q: a URL path cannot carry it (the HTTP API addresses a job as /api/jobs/NAME, where "." and ".." are resolved away); put a letter, a digit, '_' or '-' in it`, j.Name)
	}
}

// jobBody checks everything of a job but its name: the one check of a job
// of the list and of a runtime schedule. In order: its mode (jobMode) and
// the keys the mode rules out (modeKeys), what it runs (kind), its overlap
// and catch-up policies (policies), its durations (durations), a cron
// job's queue (cronQueue), and when it runs (jobSchedule).
func (v *validator) jobBody(p string, j *Job) {
	mode := v.jobMode(p, j)
	v.modeKeys(p, j, mode)
	v.kind(p, j, mode)
	v.policies(p, j)
	if mode != ModeSingleton {
		v.jobLimit(p, j)
	}
	v.chainKeys(p, j, mode)
	v.durations(p, j, mode)
	if mode == ModeCron {
		v.cronQueue(p, j)
	}
	v.jobSchedule(p, j, mode)
}

// jobMode returns the job's mode; for an unknown one, which it reports,
// ModeCron, so that the checks that follow still run.
func (v *validator) jobMode(p string, j *Job) Mode {
	at := func(field string) string { return p + "." + field }
	mode := j.Mode
	if !mode.valid() {
		v.errf(at("mode"), "unknown mode %q (want cron, local or singleton)", j.Mode)
		mode = ModeCron
	}
	return mode
}

// modeKeys reports the keys the job's mode rules out: a singleton's
// (singletonKeys), a local job's queue keys, leader outside mode local
// and restart_backoff outside mode singleton.
func (v *validator) modeKeys(p string, j *Job, mode Mode) {
	at := func(field string) string { return p + "." + field }
	switch mode {
	case ModeSingleton:
		v.singletonKeys(p, j)
	case ModeLocal:
		for _, k := range queueKeys {
			if v.set(at(k)) {
				v.errf(at(k), "not allowed for local jobs: they run in-process on the scheduler replica that claimed the tick, not through the asynq queue (no queue, no retries)")
			}
		}
	}
	if mode != ModeLocal && j.Leader {
		v.errf(at("leader"), "only for mode: local (it pins the in-process run to the cluster leader)")
	}
	if mode != ModeSingleton && v.set(at("restart_backoff")) {
		v.errf(at("restart_backoff"), "only for mode: singleton")
	}
}

// singletonKeys checks the keys of a singleton job: no schedule,
// concurrency or queue keys; no timeout unless one is given (Timeout 0);
// a restart_backoff whose initial is > 0 and max >= initial.
func (v *validator) singletonKeys(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	for _, k := range scheduleKeys {
		if v.set(at(k)) {
			v.errf(at(k), "not allowed for singleton jobs: they run continuously, not on a schedule")
		}
	}
	if v.set(at("concurrency")) {
		v.errf(at("concurrency"), "not allowed for singleton jobs: one instance runs cluster-wide, so runs never overlap")
	}
	if v.set(at("limit")) {
		v.errf(at("limit"), "not allowed for singleton jobs: a singleton runs all the time, it would hold a slot for good")
	}
	for _, k := range queueKeys {
		if v.set(at(k)) {
			v.errf(at(k), "not allowed for singleton jobs: they do not go through the queue (a failed run is restarted with restart_backoff)")
		}
	}
	if !v.set(at("timeout")) {
		j.Timeout = 0 // no limit: a singleton runs until stopped
	}
	b := j.RestartBackoff
	if b.Initial <= 0 {
		v.errf(at("restart_backoff.initial"), "must be > 0, got %s", b.Initial)
	}
	if b.Max < b.Initial {
		v.errf(at("restart_backoff.max"), "must be >= initial (%s), got %s", b.Initial, b.Max)
	}
}

// policies checks the job's overlap and catch-up policies and their
// bounds: concurrency, buffer_max, catchup and catchup_max.
func (v *validator) policies(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	if !j.Concurrency.valid() {
		v.errf(at("concurrency"), "unknown policy %q (want forbid, allow, replace, buffer_one or buffer_all)", j.Concurrency)
	}
	if j.BufferMax < 1 || j.BufferMax > 100 {
		v.errf(at("buffer_max"), "must be between 1 and 100, got %d", j.BufferMax)
	}
	if j.DST != "" && !j.DST.Valid() {
		v.errf(at("dst"), "unknown policy %q (want vixie, once, skip or both)", string(j.DST))
	}
	if !j.Catchup.Valid() {
		v.errf(at("catchup"), "unknown policy %q (want skip, latest or all)", j.Catchup)
	}
	if j.CatchupMax < 1 || j.CatchupMax > 1000 {
		v.errf(at("catchup_max"), "must be between 1 and 1000, got %d", j.CatchupMax)
	}
}

// durations checks the job's durations and counts: timeout (optional for
// a singleton), max_retry, retry_backoff, starting_deadline, jitter, the
// room a takeover needs (takeoverRoom) and lock_ttl.
func (v *validator) durations(p string, j *Job, mode Mode) {
	at := func(field string) string { return p + "." + field }
	switch {
	case mode == ModeSingleton && v.set(at("timeout")) && j.Timeout <= 0:
		v.errf(at("timeout"), "must be > 0 (leave it out for no limit), got %s", j.Timeout)
	case mode != ModeSingleton && j.Timeout <= 0:
		v.errf(at("timeout"), "must be > 0, got %s", j.Timeout)
	}
	if j.MaxRetry < 0 {
		v.errf(at("max_retry"), "must be >= 0, got %d", j.MaxRetry)
	}
	if j.RetryBackoff < 0 {
		v.errf(at("retry_backoff"), "must be >= 0, got %s", j.RetryBackoff)
	}
	if j.StartingDeadline <= 0 {
		v.errf(at("starting_deadline"), "must be > 0, got %s", j.StartingDeadline)
	}
	if j.Jitter < 0 {
		v.errf(at("jitter"), "must be >= 0, got %s", j.Jitter)
	}
	v.takeoverRoom(p, j, mode)
	if j.LockTTL < time.Second {
		v.errf(at("lock_ttl"), "must be at least 1s, got %s", j.LockTTL)
	}
}

// takeoverRoom checks that a scheduled job's starting deadline leaves
// room: a tick fired with the job's jitter must not be missed already, and
// another replica must be able to take over a tick whose owner died.
func (v *validator) takeoverRoom(p string, j *Job, mode Mode) {
	c := v.cfg
	at := func(field string) string { return p + "." + field }
	// an owner that dies after claiming a tick holds it for the tick lease;
	// a follower looks again after its delay: the deadline must leave room
	takeover := c.Scheduler.TickLeaseTTL + FollowerDelay + j.Jitter
	switch {
	case mode == ModeSingleton || j.StartingDeadline <= 0:
	case j.Jitter >= j.StartingDeadline:
		v.errf(at("jitter"), "%s must be below starting_deadline (%s): a tick fired that late would already be missed", formatDuration(j.Jitter), formatDuration(j.StartingDeadline))
	case j.StartingDeadline <= takeover:
		v.errf(at("starting_deadline"), "%s is too short for another replica to take over a tick whose owner died: it must exceed scheduler.tick_lease_ttl %s + the follower delay %s + jitter %s = %s",
			formatDuration(j.StartingDeadline), formatDuration(c.Scheduler.TickLeaseTTL), formatDuration(FollowerDelay), formatDuration(j.Jitter), formatDuration(takeover))
	}
}

// cronQueue checks a cron job's queue, which must be one of worker.queues
// when those are listed, and the asynq retention its starting deadline
// asks for, which must stay within asynq's 7 days.
func (v *validator) cronQueue(p string, j *Job) {
	c := v.cfg
	at := func(field string) string { return p + "." + field }
	if _, ok := c.Worker.Queues[j.Queue]; !ok && len(c.Worker.Queues) > 0 {
		have := strings.Join(slices.Sorted(mapKeys(c.Worker.Queues)), ", ")
		if v.set(at("queue")) {
			v.errf(at("queue"), "queue %q is not in worker.queues (have: %s)", j.Queue, have)
		} else {
			v.errf(at("queue"), "the default queue %q is not in worker.queues (have: %s): set queue", j.Queue, have)
		}
	}
	if r := c.Retention(j); j.StartingDeadline > 0 && r > maxRetention {
		v.errf(at("starting_deadline"), "asynq retention would be %s (starting_deadline %s + scheduler.tick_lease_ttl %s + 2 x max_clock_skew %s + scheduler.retention_margin %s), more than the 7-day limit: asynq remembers a task ID only while the task is retained, so every completed task is kept that long; lower starting_deadline",
			formatDuration(r), formatDuration(j.StartingDeadline), formatDuration(c.Scheduler.TickLeaseTTL), formatDuration(c.MaxClockSkew), formatDuration(c.Scheduler.RetentionMargin))
	}
}

// jobSchedule checks when the job runs and sets its Location and Sched. A
// singleton has neither (singletonSchedule). Any other job gets its zone
// (jobZone) and a max_runs >= 0, then either its one tick (at: oneShot) or
// its schedule: required, parsed in its zone (read in UTC for the spec's
// own errors when the zone is unknown), limited to start and end (window),
// and spaced so that its jitter and tick records fit (spacing).
func (v *validator) jobSchedule(p string, j *Job, mode Mode) {
	at := func(field string) string { return p + "." + field }
	if mode == ModeSingleton {
		v.singletonSchedule(p, j)
		return
	}
	v.jobZone(p, j)
	if j.MaxRuns < 0 {
		v.errf(at("max_runs"), "must be >= 0 (0: no limit), got %d", j.MaxRuns)
	}
	if len(j.After) > 0 {
		return // its parents' ticks, once all jobs are read (chains)
	}
	if j.At != "" {
		if j.DST != "" {
			v.errf(at("dst"), "not for a one-shot job: its instant is absolute")
		}
		for _, k := range []string{"exclude", "only"} {
			if v.set(at(k)) {
				v.errf(at(k), "not for a one-shot job: its one instant is given")
			}
		}
		v.oneShot(p, j)
		return
	}
	if strings.TrimSpace(j.Schedule) == "" {
		v.errf(at("schedule"), "required (or at, for a one-shot job; only mode: singleton runs without a schedule)")
		return
	}
	spec, err := schedule.Hashed(j.Schedule, j.Name)
	if err != nil {
		v.errf(at("schedule"), "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("schedule: %q: ", strings.TrimSpace(j.Schedule))))
		return
	}
	if spec != strings.TrimSpace(j.Schedule) {
		j.Hashed = spec
	}
	if j.Location == nil {
		// The zone is reported already; the spec's own errors are
		// reported too, read in UTC.
		if _, err := parseSchedule(spec, time.UTC, j.DST); err != nil {
			v.errf(at("schedule"), "%s", err.Error())
		}
		return
	}
	sched, err := parsed.schedule(spec, j.Location, j.DST)
	if err != nil {
		v.errf(at("schedule"), "%s", err.Error())
		return
	}
	sched, bounds, ok := v.window(p, j, sched)
	if !ok {
		return
	}
	if days, ok := v.jobDays(p, j); ok {
		j.Unfiltered, sched = sched, schedule.OnDays(sched, j.Location, days)
		if sched.Next(calendarCheckFrom).IsZero() {
			v.errf(at("schedule"), "%q has no tick on a day its exclude and only calendars leave", j.Schedule)
			return
		}
	}
	j.Sched = sched
	v.spacing(p, j, sched, bounds)
}

// singletonSchedule reports a singleton's start and end, and clears its
// schedule and zone: it runs without a schedule.
func (v *validator) singletonSchedule(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	for _, f := range []struct{ name, v string }{{"start", j.Start}, {"end", j.End}} {
		if f.v != "" {
			v.errf(at(f.name), "not for mode: singleton (it runs without a schedule)")
		}
	}
	j.Schedule, j.Timezone, j.Location = "", "", nil
}

// jobZone sets the job's Location: its timezone's, or the config's when it
// names none. An unknown zone is reported and leaves Location nil.
func (v *validator) jobZone(p string, j *Job) {
	c := v.cfg
	at := func(field string) string { return p + "." + field }
	if j.Timezone == "" {
		j.Timezone, j.Location = c.Timezone, c.Location
	} else if loc, err := loadZone(j.Timezone); err != nil {
		v.errf(at("timezone"), "%s", err.Error())
	} else {
		j.Location = loc
	}
}

// window reads the job's start and end (RFC 3339, both optional) and
// returns sched limited to them, with the bounds (zero: none). It reports
// the first problem and returns false when start or end cannot be read,
// end is not after start, or no tick falls between them.
func (v *validator) window(p string, j *Job, sched schedule.Schedule) (schedule.Schedule, [2]time.Time, bool) {
	at := func(field string) string { return p + "." + field }
	var bounds [2]time.Time
	for i, f := range []struct{ name, v string }{{"start", j.Start}, {"end", j.End}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			v.errf(at(f.name), "%q is not an RFC 3339 time (such as 2026-12-05T02:00:00+01:00)", f.v)
			return nil, bounds, false
		}
		bounds[i] = t
	}
	if !bounds[0].IsZero() && !bounds[1].IsZero() && !bounds[1].After(bounds[0]) {
		v.errf(at("end"), "%s is not after start %s", j.End, j.Start)
		return nil, bounds, false
	}
	if !bounds[0].IsZero() || !bounds[1].IsZero() {
		sched = schedule.Window(sched, bounds[0], bounds[1])
		if first := sched.Next(bounds[0].Add(-time.Nanosecond)); first.IsZero() {
			v.errf(at("schedule"), "%q has no tick between start and end", j.Schedule)
			return nil, bounds, false
		}
	}
	return sched, bounds, true
}

// spacing checks what the schedule's interval (its shortest gap between
// two ticks in the week ahead) allows: a jitter shorter than it, or ticks
// would overlap; and no more tick records alive at once than
// scheduler.max_tick_records.
func (v *validator) spacing(p string, j *Job, sched schedule.Schedule, bounds [2]time.Time) {
	c := v.cfg
	at := func(field string) string { return p + "." + field }
	// keyed by what decides the ticks: the spec as resolved (H), its DST
	// policy and its calendars' days, beside the zone and the window
	key := j.Schedule
	if j.Hashed != "" {
		key = j.Hashed
	}
	key += "\x00" + string(j.DST)
	for _, name := range slices.Concat(j.Exclude, []string{"\x00"}, j.Only) {
		if cs := c.Calendars[name]; cs != nil {
			key += "\x00" + name + "=" + cs.Calendar.String()
		} else {
			key += "\x00" + name
		}
	}
	var interval time.Duration
	if len(j.After) > 0 {
		interval = schedule.ShortestInterval(sched, v.now) // its parents' ticks: no spec to key a cache by
	} else {
		interval = parsed.interval(key, j.Location, bounds, sched, v.now)
	}
	if interval > 0 && j.Jitter >= interval && j.Jitter > 0 {
		v.errf(at("jitter"), "%s is not shorter than the schedule's interval (%s): ticks would overlap", j.Jitter, interval)
	}
	if r, limit := c.Retention(j), c.Scheduler.MaxTickRecords; interval > 0 && j.StartingDeadline > 0 && limit >= 1 {
		if n := int64(r/interval) + 1; n > int64(limit) && maxTicksWithin(sched, v.now, r, limit) > limit {
			n = int64(maxTicksWithin(sched, v.now, r, limit))
			v.errf(at("starting_deadline"), "the job would keep %d tick records (records and retained tasks live %s: starting_deadline %s + scheduler.tick_lease_ttl %s + 2 x max_clock_skew %s + scheduler.retention_margin %s; a tick every %s), more than scheduler.max_tick_records %d: lower starting_deadline, or raise scheduler.max_tick_records",
				n, formatDuration(r), formatDuration(j.StartingDeadline), formatDuration(c.Scheduler.TickLeaseTTL), formatDuration(c.MaxClockSkew), formatDuration(c.Scheduler.RetentionMargin), formatDuration(interval), limit)
		}
	}
}

// oneShot checks a job with at (a single tick) and sets its schedule.
func (v *validator) oneShot(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	if strings.TrimSpace(j.Schedule) != "" {
		v.errf(at("at"), "set schedule or at, not both (at is a single tick)")
		return
	}
	for _, f := range []struct{ name, v string }{{"start", j.Start}, {"end", j.End}} {
		if f.v != "" {
			v.errf(at(f.name), "not with at: a one-shot job has its one tick")
		}
	}
	t, err := time.Parse(time.RFC3339, j.At)
	switch {
	case err != nil:
		v.errf(at("at"), "%q is not an RFC 3339 time (such as 2026-12-05T02:00:00+01:00)", j.At)
		return
	case t.Nanosecond() != 0:
		v.errf(at("at"), "%q: ticks fall on whole seconds", j.At)
		return
	}
	j.Sched = schedule.Once(t)
}

// maxTicksWithin returns the most ticks of s that fall within any span of
// length r (the records alive at once), looking at the ticks of the 8 days
// after from (a week's pattern) plus r. Once some span holds more than
// limit, it finishes that span and returns its count. It looks at no more
// than a million ticks.
func maxTicksWithin(s schedule.Schedule, from time.Time, r time.Duration, limit int) int {
	end := from.Add(8*24*time.Hour + r)
	var window []time.Time // the ticks of the current span, oldest first
	best, bestStart := 0, time.Time{}
	t := from
	for range 1_000_000 {
		t = s.Next(t)
		if t.IsZero() || t.After(end) {
			break
		}
		if best > limit && t.Sub(bestStart) > r {
			break // the span that went over is complete
		}
		window = append(window, t)
		for t.Sub(window[0]) > r {
			window = window[1:]
		}
		if len(window) > best {
			best, bestStart = len(window), window[0]
		}
	}
	return best
}

// parseSchedule parses spec with schedule.Parse, the one parser
// every replica uses, and turns its error into a validation message: without
// the "schedule: ..." prefix (the field path already names it), and
// with a plain message for a wrong number of fields.
func parseSchedule(spec string, loc *time.Location, dst DST) (schedule.Schedule, error) {
	if f := strings.Fields(spec); !strings.HasPrefix(spec, "@") && (len(f) < 5 || len(f) > 6) &&
		!strings.HasPrefix(spec, "TZ=") && !strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("expected 5 or 6 fields, found %d", len(f))
	}
	if !dst.Valid() {
		dst = "" // reported as dst's own error; the spec is read as vixie
	}
	s, err := schedule.ParseDST(spec, loc, dst)
	if err == nil {
		return s, nil
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, fmt.Sprintf("schedule: %q: ", spec))
	if msg == "never fires" {
		return nil, fmt.Errorf("%q never fires", spec)
	}
	return nil, errors.New(msg)
}

// kind checks that exactly one of exec, http and handler is set, and the one
// that is.
func (v *validator) kind(p string, j *Job, mode Mode) {
	at := func(field string) string { return p + "." + field }
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"exec", j.Exec != nil}, {"http", j.HTTP != nil}, {"handler", j.Handler != nil}} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	switch len(kinds) {
	case 0:
		if IsScheduleJob(j.Name) {
			// a runtime schedule takes no command
			v.errf(p, "set one of handler (a Go handler a replica registers: handler.name) or http (a URL under schedules.http_prefixes: http.url)")
			return
		}
		v.errf(p, "set one of exec, http or handler")
		return
	case 1:
	default:
		slices.SortStableFunc(kinds, func(a, b string) int { return v.lineOf(at(a)) - v.lineOf(at(b)) })
		v.errf(at(kinds[1]), "set only one of exec, http or handler, found %s", strings.Join(kinds, " and "))
		return
	}
	if mode == ModeSingleton && j.HTTP != nil {
		v.errf(at("http"), "a singleton runs exec or handler, not http (a request is not a long-running process)")
	}
	if e := j.Exec; e != nil {
		switch {
		case len(e.Command) == 0:
			v.errf(at("exec.command"), "required: a non-empty argv, e.g. [sh, -c, \"...\"]")
		case e.Command[0] == "":
			v.errf(at("exec.command[0]"), "the program name is empty")
		}
		for i, p := range e.InheritEnv {
			if err := childenv.Check(p); err != nil {
				v.errf(at(fmt.Sprintf("exec.inherit_env[%d]", i)), "%s", err.Error())
			}
		}
		for _, k := range slices.Sorted(mapKeys(e.Env)) {
			kp := at("exec.env." + k)
			switch {
			case !envNameCharRE.MatchString(k):
				v.errf(kp, "invalid environment variable name %q", k)
			case strings.HasPrefix(k, "BATON_"):
				v.errf(kp, "names starting with BATON_ are reserved for the run's identity (BATON_JOB, BATON_TICK, BATON_FENCING_TOKEN, ...)")
			}
		}
	}
	if h := j.HTTP; h != nil {
		if h.Method == "" {
			h.Method = "GET"
		}
		switch {
		case httpMethodRE.MatchString(h.Method):
		case httpMethodRE.MatchString(strings.ToUpper(h.Method)):
			v.errf(at("http.method"), "%q: write methods in upper case (%s)", h.Method, strings.ToUpper(h.Method))
		default:
			v.errf(at("http.method"), "invalid method %q", h.Method)
		}
		if err := checkHTTPURL(h.URL); err != nil {
			v.errf(at("http.url"), "%s", err.Error())
		}
		for _, k := range slices.Sorted(mapKeys(h.Headers)) {
			kp := at("http.headers." + k)
			switch {
			case !headerNameRE.MatchString(k):
				v.errf(kp, "invalid header name %q", k)
			case strings.HasPrefix(strings.ToLower(k), "x-baton-"):
				v.errf(kp, "X-Baton-* headers are reserved for the run's identity (X-Baton-Job, X-Baton-Tick, ...)")
			case !validHeaderValue(h.Headers[k]):
				// the value is not quoted: it may hold a secret
				v.errf(kp, "the value holds a control character (CR, LF, NUL, ...), which no request can carry: every run would fail")
			}
		}
		for i, s := range h.ExpectStatus {
			if s < 100 || s > 599 {
				v.errf(fmt.Sprintf("%s[%d]", at("http.expect_status"), i), "status %d is not between 100 and 599", s)
			}
		}
	}
	if h := j.Handler; h != nil {
		switch {
		case h.Name == "":
			v.errf(at("handler.name"), "required: the name the Go handler is registered under")
		case !jobNameRE.MatchString(h.Name):
			v.errf(at("handler.name"), "invalid handler name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", h.Name)
		}
	}
}

func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errors.New(`"Local" is not allowed: replicas on hosts in different zones would disagree on ticks; name a zone such as UTC or Europe/Berlin`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}

// hostLabelRE is one label of a DNS name.
var hostLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// httpHosts checks http.hosts and writes each name in lower case, without
// a trailing dot, as requests are matched against it.
func (v *validator) httpHosts() {
	hosts := v.cfg.HTTP.Hosts
	seen := map[string]bool{}
	for i, h := range hosts {
		p := fmt.Sprintf("http.hosts[%d]", i)
		name := strings.TrimSuffix(strings.ToLower(h), ".")
		if err := checkHostName(name); err != nil {
			v.errf(p, "%q %s", h, err)
			continue
		}
		if seen[name] {
			v.errf(p, "%q is listed twice", h)
		}
		seen[name] = true
		hosts[i] = name
	}
}

// checkHostName says what is wrong with name as an entry of http.hosts.
func checkHostName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty: write a DNS name such as baton.internal")
	case strings.Contains(name, "://") || strings.Contains(name, "/"):
		return errors.New("is not a name: write the host alone, without scheme or path (baton.internal)")
	case net.ParseIP(strings.Trim(name, "[]")) != nil:
		return errors.New("is an IP address: IP addresses are always answered, list names only")
	case strings.Contains(name, ":"):
		return errors.New("has a port: write the name alone, requests on every port match it")
	case name == "*" || name == "*.":
		return errors.New("would answer every name, which is what the list prevents: list the names baton is reached by")
	case len(name) > 253:
		return errors.New("is longer than a DNS name can be (253 bytes)")
	}
	labels := strings.Split(strings.TrimPrefix(name, "*."), ".")
	for _, l := range labels {
		if !hostLabelRE.MatchString(l) {
			if strings.Contains(l, "*") {
				return errors.New(`has a "*" inside: only a leading "*." is a wildcard (*.example.com)`)
			}
			return fmt.Errorf("is not a DNS name: label %q (use a-z, 0-9 and '-', 1 to 63 per label)", l)
		}
	}
	if strings.HasPrefix(name, "*.") && len(labels) < 2 {
		return errors.New(`covers a whole top-level domain: name one under it (*.example.com)`)
	}
	return nil
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("invalid address %q: %s", s, ae.Err)
		}
		return fmt.Errorf("invalid address %q", s)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("invalid host %q", host)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("invalid port %q", port)
	}
	return nil
}

// checkRedisURL validates a redis:// or rediss:// URL as every replica
// reads it (internal/redisurl/syntax: "//host" required, go-redis's
// options only). The error names the URL as shown, which the caller masks.
func checkRedisURL(s, shown string) (syntax.Target, error) {
	t, err := syntax.Check(s)
	if err != nil {
		return t, fmt.Errorf("invalid Redis URL %q: %w", shown, err)
	}
	return t, nil
}

func checkHTTPURL(s string) error {
	if s == "" {
		return errors.New("required: an http:// or https:// URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("invalid URL: %w", urlErr(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// the scheme only: the rest may hold a user, a host or a token
		// (of a ${VAR} value, masked only where a message quotes it whole)
		return fmt.Errorf("scheme must be http:// or https://, got %q", u.Scheme+"://")
	}
	if u.Host == "" {
		return errors.New("no host: write http://host/path or https://host/path")
	}
	return nil
}

// urlErr drops the URL from a *url.Error, keeping only what went wrong.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// validHeaderValue says whether a request can carry v as a header's value:
// no control character but the tab (RFC 9110 field-value; bytes of 0x80
// and above pass, as net/http sends them).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}
