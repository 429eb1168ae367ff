package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/strictyaml"
	"github.com/batonhq/baton/schedule"
)

// SchedulesConfig bounds the schedules made at runtime: jobs defined
// through the Go API, `baton schedules` or the HTTP API and kept in the
// queue Redis, beside the job list (see DecodeSchedule).
type SchedulesConfig struct {
	// HTTPPrefixes are the URL prefixes a runtime schedule's http job may
	// call ("https://hooks.internal/tenants/"): scheme and host exactly,
	// the path at a segment boundary. Empty (the default): runtime
	// schedules run Go handlers only.
	HTTPPrefixes []string `yaml:"http_prefixes"`
	// MaxPayload bounds a runtime schedule's handler payload and http body,
	// in bytes. Default 16384; 1..1048576.
	MaxPayload int `yaml:"max_payload"`
	// History is how many runs of each runtime schedule are kept, the
	// newest (history.runs is the job list's): that many elements of its
	// history list, where an attempt that ended is one element (its end,
	// which says when it started) and a run under way is its start.
	// Default 3 (about 1 KB of Redis per schedule: a deployment may have
	// 100,000); 0..1000.
	History int `yaml:"history"`
	// Resync is how often a replica re-reads every runtime schedule: the
	// fallback for a change it missed (changes reach replicas at once, by
	// a stream they follow). Default 5m; >= 10s.
	Resync time.Duration `yaml:"resync"`
	// Shards is how many parts the store of runtime schedules and its
	// stream of changes are split into, each in a hash slot of its own, so
	// that a Redis Cluster spreads them over its primaries. Every replica
	// of a namespace must say the same: `baton init` records it in Redis
	// and moves the stored schedules when it changes, and a replica whose
	// config says otherwise refuses to start. Default 1; 1..1024.
	Shards int `yaml:"shards"`
	// Metrics lists the runtime schedules that get series of their own in
	// the metrics, by id prefix ("report/tenant-42", "billing/"); the
	// others count together under job="@" (a label per schedule would grow
	// without bound). Default: none.
	Metrics []string `yaml:"metrics"`
}

// MaxShards bounds schedules.shards and worker.queue_lanes.
const MaxShards = 1024

// MetricJob is the job label of job's metrics: its name, but "@" for a
// runtime schedule that schedules.metrics does not name.
func (c *Config) MetricJob(job string) string {
	id, ok := ScheduleID(job)
	if !ok {
		return job
	}
	for _, p := range c.Schedules.Metrics {
		if strings.HasPrefix(id, p) {
			return job
		}
	}
	return schedulePrefix
}

// JobSource holds the runtime schedules a Config's Job finds beside the
// job list (Config.WithSource).
type JobSource interface {
	// ScheduleJob returns the job of the runtime schedule named name (a
	// name IsScheduleJob says is one), if the source holds it.
	ScheduleJob(name string) (*Job, bool)
}

// ChildSource is a JobSource that also knows which of its runtime
// schedules run after a job (after:): Config.Children adds them to the
// job list's.
type ChildSource interface {
	JobSource
	// ScheduleChildren returns the runtime schedules that run after job.
	ScheduleChildren(job string) []*Job
}

// WithSource returns a copy of c whose Job also finds the runtime
// schedules of src. c itself is unchanged; both share the job list.
func (c *Config) WithSource(src JobSource) *Config {
	cp := *c
	cp.source = src
	return &cp
}

// schedulePrefix starts the job name of every runtime schedule: no job of
// the list can have it, so the two never share a name or a key.
const schedulePrefix = "@"

// scheduleIDRE is a runtime schedule's id: what follows schedulePrefix in
// its job name. '/' may group ids ("report/tenant-42"); ':', '{', '}' and
// glob characters, which baton's keys and key patterns use, may not.
var scheduleIDRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/=+-]{0,127}$`)

// ScheduleJobName is the job name of the runtime schedule id: "@" + id.
func ScheduleJobName(id string) string { return schedulePrefix + id }

// IsScheduleJob reports whether name is a runtime schedule's job name.
func IsScheduleJob(name string) bool { return strings.HasPrefix(name, schedulePrefix) }

// ScheduleID is the id of the runtime schedule whose job is named name,
// and whether name is one.
func ScheduleID(name string) (string, bool) { return strings.CutPrefix(name, schedulePrefix) }

// CheckScheduleID returns why id cannot name a runtime schedule, or nil.
func CheckScheduleID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("a schedule id is required (such as report/tenant-42)")
	case !scheduleIDRE.MatchString(id):
		return fmt.Errorf("invalid schedule id %q: use 1 to 128 of A-Z, a-z, 0-9, '.', '_', '/', '=', '+', '-', starting with a letter, a digit or '_'", id)
	case strings.Contains(id, "//") || strings.HasSuffix(id, "/"):
		return fmt.Errorf("invalid schedule id %q: no empty segment between '/'", id)
	}
	for _, seg := range strings.Split(id, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("invalid schedule id %q: a URL path cannot carry the segment %q", id, seg)
		}
	}
	return nil
}

// MaxScheduleDocument bounds a runtime schedule's definition beyond its
// payload: the document may be schedules.max_payload plus this long.
const MaxScheduleDocument = 16 << 10

// DecodeSchedule reads the definition of the runtime schedule id: a YAML or
// JSON mapping with the keys of a job of the list but name (the id names
// it), checked as the job list's jobs are, with base's defaults (zone,
// queues, deadlines) and with the rules of schedules made at runtime:
//
//   - it runs a Go handler, or an http request to a URL under one of
//     schedules.http_prefixes; never a command (exec jobs come only from
//     the file, so that write access to Redis does not become command
//     execution);
//   - mode cron (through the queue);
//   - its payload or body is at most schedules.max_payload bytes.
//
// Nothing in doc is expanded (${VAR} is text). created is when the id was
// first put: a recurring schedule has no tick before it. The error is a
// *Error whose FieldErrors name the job ("@"+id), the field and the
// line in doc.
func DecodeSchedule(base *Config, id string, doc []byte, created time.Time) (*Job, error) {
	name := ScheduleJobName(id)
	fail := func(field, format string, args ...any) error {
		return &Error{Errors: []FieldError{{Job: name, Field: field, Msg: fmt.Sprintf(format, args...)}}}
	}
	if err := CheckScheduleID(id); err != nil {
		return nil, &Error{Errors: []FieldError{{Field: "id", Msg: err.Error()}}}
	}
	if limit := base.Schedules.MaxPayload + MaxScheduleDocument; len(doc) > limit {
		return nil, fail("", "the definition is %d bytes, more than schedules.max_payload + %d = %d", len(doc), MaxScheduleDocument, limit)
	}
	// a stored definition is one line of JSON, read without the YAML
	// parser (a replica reads a million at start); the rest, and whatever
	// is wrong, goes through it
	root, ok := strictyaml.ParseJSON(doc)
	var problem *strictyaml.Problem
	if !ok {
		root, problem = strictyaml.Parse(doc, "a schedule definition")
	}
	if problem != nil {
		return nil, &Error{Errors: []FieldError{{Job: name, Line: problem.Line, Field: problem.Path, Msg: problem.Msg}}}
	}
	if problem = strictyaml.Bound(root); problem != nil {
		return nil, &Error{Errors: []FieldError{{Job: name, Line: problem.Line, Field: problem.Path, Msg: problem.Msg}}}
	}
	if root.Kind != yaml.MappingNode {
		return nil, fail("", "a definition is a mapping of a job's keys (schedule, handler, ...), not %s", strictyaml.Describe(root))
	}
	d := &decoder{
		lookup:   func(string) (string, bool) { return "", false },
		expanded: map[*yaml.Node]bool{},
		emptyVar: map[*yaml.Node]string{},
		jobNames: map[int]string{0: name},
		fromEnv:  map[string]envValue{},
	}
	d.Report = d.report
	d.Absent = d.absent
	d.Init = func(elem any) {
		if j, ok := elem.(*Job); ok {
			j.applyDefaults()
		}
	}
	// the definition is decoded as the one job of a list, so that every
	// message names the job and its field as the job list's do
	wrapper := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "jobs"}, {Kind: yaml.SequenceNode, Content: []*yaml.Node{root}},
	}}
	var list struct {
		Jobs []Job `yaml:"jobs"`
	}
	d.Decode(wrapper, &list)
	if len(list.Jobs) != 1 {
		return nil, fail("", "not decoded")
	}
	j := &list.Jobs[0]
	cfg := *base
	if base.loadedSkew > 0 {
		// held to the rules the job list was loaded under: a program that
		// raises max_clock_skew afterwards (batontest, whose fake clock
		// runs ahead of the real one) does not make every retention-bound
		// check fail
		cfg.MaxClockSkew = base.loadedSkew
	}
	v := &validator{decoder: d, cfg: &cfg, now: time.Now(), runtime: true}
	const p = "jobs[0]"
	if v.set(p + ".name") {
		v.errf(p+".name", "not in a runtime schedule's definition: its id names it")
	}
	j.Name = name
	j.Line, _ = v.Line(p)
	v.jobBody(p, j)
	v.runtimeRules(p, j)
	v.runtimeChain(p, j)
	if len(d.errs) > 0 {
		for i := range d.errs {
			d.errs[i].File = ""
		}
		return nil, &Error{Errors: d.errs}
	}
	if j.At == "" && j.Sched != nil && !created.IsZero() {
		j.Sched = schedule.Window(j.Sched, created, time.Time{})
		j.Created = created
	}
	j.secrets = base.secrets
	return j, nil
}

// runtimeRules checks what a runtime schedule may not do that a job of the
// list may.
func (v *validator) runtimeRules(p string, j *Job) {
	at := func(field string) string { return p + "." + field }
	s := v.cfg.Schedules
	if j.Exec != nil {
		v.errf(at("exec"), "not in a runtime schedule: commands come only from the config file, so that write access to Redis does not become command execution; run a Go handler (handler.name) or an http request under schedules.http_prefixes")
	}
	if j.Mode != ModeCron && j.Mode.valid() {
		v.errf(at("mode"), "a runtime schedule runs in mode cron (through the queue), not %s", j.Mode)
	}
	// the job list's rule (validator.quarantine), which the list checks
	// when it loads: a lease longer than the restart quarantine is never
	// granted, so every run would fail to take its execution lease
	if q := v.cfg.Locking.RestartQuarantine; q > 0 && j.LockTTL > q {
		def := ""
		if !v.set(at("lock_ttl")) {
			def = " (the default)"
		}
		v.errf(at("lock_ttl"), "%s%s is longer than locking.restart_quarantine %s: no run could take its execution lease (a restarted lock master could grant it while held); set lock_ttl to %s or less",
			formatDuration(j.LockTTL), def, formatDuration(q), formatDuration(q))
	}
	if h := j.Handler; h != nil && len(h.Payload) > s.MaxPayload {
		v.errf(at("handler.payload"), "%d bytes as JSON, more than schedules.max_payload %d", len(h.Payload), s.MaxPayload)
	}
	if h := j.HTTP; h != nil {
		if len(h.Body) > s.MaxPayload {
			v.errf(at("http.body"), "%d bytes, more than schedules.max_payload %d", len(h.Body), s.MaxPayload)
		}
		for k := range h.Headers {
			if strings.EqualFold(k, "Host") {
				// the request would reach whatever site the allowed host's
				// address serves under that name: outside the prefixes
				v.errf(at("http.headers."+k), "a runtime schedule cannot set the Host header: its request goes to the host of its URL, under schedules.http_prefixes")
			}
		}
		if h.URL != "" && checkHTTPURL(h.URL) == nil {
			if err := allowedURL(h.URL, s.HTTPPrefixes); err != nil {
				v.errf(at("http.url"), "%s", err.Error())
			}
		}
	}
}

// allowedURL returns why raw lies under none of prefixes, or nil: same
// scheme and host, and a path that starts with the prefix's at a segment
// boundary, with no "." or ".." segment and no escaped '/' or '.'.
func allowedURL(raw string, prefixes []string) error {
	if len(prefixes) == 0 {
		return fmt.Errorf("a runtime schedule may call URLs under schedules.http_prefixes only, and the config lists none")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return urlErr(err)
	}
	if u.User != nil {
		return fmt.Errorf("no user info in a runtime schedule's URL")
	}
	if !isASCII(u.Host) {
		// compared as ASCII only: Unicode case folding took "localhoſt"
		// for "localhost", and the request went to its xn-- form
		return fmt.Errorf("the host of a runtime schedule's URL must be ASCII: write an internationalized name in its xn-- form")
	}
	esc := strings.ToLower(u.EscapedPath())
	if strings.Contains(esc, "%2f") || strings.Contains(esc, "%2e") || strings.Contains(esc, "%5c") || strings.Contains(u.Path, `\`) {
		return fmt.Errorf("an escaped '/', '.' or '\\' in the path of a runtime schedule's URL is not allowed")
	}
	if strings.Contains(esc, "%25") {
		// decoded twice by a server on the way, %252e%252e is ".."
		return fmt.Errorf("an escaped '%%' in the path of a runtime schedule's URL is not allowed")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		// a server that takes ";" for segment parameters reads "..;" as ".."
		if bare, _, _ := strings.Cut(seg, ";"); bare == "." || bare == ".." {
			return fmt.Errorf("a %q segment in the path of a runtime schedule's URL is not allowed", seg)
		}
	}
	for _, pre := range prefixes {
		pu, err := url.Parse(pre)
		if err != nil || !asciiEqualFold(pu.Scheme, u.Scheme) || !asciiEqualFold(pu.Host, u.Host) {
			continue
		}
		pp := pu.Path
		if pp == "" || pp == "/" || u.Path == pp {
			return nil
		}
		if strings.HasSuffix(pp, "/") && strings.HasPrefix(u.Path, pp) || strings.HasPrefix(u.Path, pp+"/") {
			return nil
		}
	}
	return fmt.Errorf("%s is under none of schedules.http_prefixes (%s)", shownPrefix(u), strings.Join(prefixes, ", "))
}

// isASCII tells whether s holds ASCII only.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiEqualFold is strings.EqualFold of ASCII letters only: a non-ASCII
// byte matches only itself (no Unicode folding: "ſ" is not "s").
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// shownPrefix is u's scheme, host and path, without its query (which may
// carry a token).
func shownPrefix(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path.Clean("/" + u.Path)}).String()
}

// schedules checks the schedules section.
func (v *validator) schedules() {
	s := &v.cfg.Schedules
	if s.MaxPayload < 1 || s.MaxPayload > 1<<20 {
		v.errf("schedules.max_payload", "must be between 1 and 1048576 bytes, got %d", s.MaxPayload)
	}
	if s.History < 0 || s.History > 1000 {
		v.errf("schedules.history", "must be between 0 (no history) and 1000, got %d", s.History)
	}
	if s.Shards < 1 || s.Shards > MaxShards {
		v.errf("schedules.shards", "must be between 1 and %d, got %d", MaxShards, s.Shards)
	}
	if s.Resync < 10*time.Second {
		v.errf("schedules.resync", "must be >= 10s, got %s", formatDuration(s.Resync))
	}
	for i, pre := range s.HTTPPrefixes {
		p := fmt.Sprintf("schedules.http_prefixes[%d]", i)
		if err := checkHTTPURL(pre); err != nil {
			v.errf(p, "%s", err.Error())
			continue
		}
		switch u, _ := url.Parse(pre); {
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			v.errf(p, "a prefix is a scheme, a host and a path: no query, fragment or user info")
		case !isASCII(u.Host):
			v.errf(p, "the host must be ASCII: write an internationalized name in its xn-- form")
		}
	}
}

// HistoryRuns is how many runs of job the history keeps: schedules.history
// for a runtime schedule, history.runs for a job of the list.
func (c *Config) HistoryRuns(job string) int {
	if IsScheduleJob(job) {
		return c.Schedules.History
	}
	return c.History.Runs
}

// ScheduleDocument returns a definition (YAML or JSON) as compact JSON: the
// form runtime schedules are stored in. Only the keys doc sets are
// written, so defaults stay defaults.
func ScheduleDocument(doc []byte) (json.RawMessage, error) {
	// a stored definition is one line of JSON, read without the YAML
	// parser (a replica reads a million at start); the rest, and whatever
	// is wrong, goes through it
	root, ok := strictyaml.ParseJSON(doc)
	var problem *strictyaml.Problem
	if !ok {
		root, problem = strictyaml.Parse(doc, "a schedule definition")
	}
	if problem != nil {
		return nil, fmt.Errorf("line %d: %s", problem.Line, problem.Msg)
	}
	v, err := strictyaml.NodeJSON(root)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// parsed keeps the schedules parsed and their shortest intervals, by spec
// and zone: a deployment's runtime schedules repeat a few specs many times
// over (every tenant's report at 09:00), and a replica checks each of them
// at start and at every resync. Both are pure functions of their keys
// (the interval of the week ahead: within a process's life, a change of
// the zone's rules is ignored, as it is for the job list).
var parsed = &parseCache{}

type parseCache struct {
	mu        sync.Mutex
	schedules map[[3]string]schedule.Schedule
	intervals map[intervalKey]time.Duration
}

type intervalKey struct {
	spec, zone string
	start, end time.Time
}

// parseCacheMax bounds each of the cache's maps: past it, nothing more is
// kept (parsing goes on uncached).
const parseCacheMax = 100000

func (c *parseCache) schedule(spec string, loc *time.Location, dst DST) (schedule.Schedule, error) {
	k := [3]string{spec, loc.String(), string(dst)}
	c.mu.Lock()
	s, ok := c.schedules[k]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := parseSchedule(spec, loc, dst)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.schedules == nil {
		c.schedules = map[[3]string]schedule.Schedule{}
	}
	if len(c.schedules) < parseCacheMax {
		c.schedules[k] = s
	}
	c.mu.Unlock()
	return s, nil
}

func (c *parseCache) interval(spec string, loc *time.Location, bounds [2]time.Time, s schedule.Schedule, now time.Time) time.Duration {
	k := intervalKey{spec: spec, zone: loc.String(), start: bounds[0], end: bounds[1]}
	c.mu.Lock()
	d, ok := c.intervals[k]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = schedule.ShortestInterval(s, now)
	c.mu.Lock()
	if c.intervals == nil {
		c.intervals = map[intervalKey]time.Duration{}
	}
	if len(c.intervals) < parseCacheMax {
		c.intervals[k] = d
	}
	c.mu.Unlock()
	return d
}

// MaskScheduleDocument returns a stored definition (JSON) as it is shown
// to readers: the values of its http headers masked, as the printed job
// list's are (a header carries a token as often as not). A document it
// cannot read comes back as it is.
func MaskScheduleDocument(doc json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(doc, &top) != nil || top["http"] == nil {
		return doc
	}
	var h map[string]json.RawMessage
	if json.Unmarshal(top["http"], &h) != nil || h["headers"] == nil {
		return doc
	}
	var headers map[string]json.RawMessage
	if json.Unmarshal(h["headers"], &headers) != nil {
		return doc
	}
	masked, _ := json.Marshal(redacted)
	for k := range headers {
		headers[k] = masked
	}
	var err error
	if h["headers"], err = json.Marshal(headers); err != nil {
		return doc
	}
	if top["http"], err = json.Marshal(h); err != nil {
		return doc
	}
	out, err := json.Marshal(top)
	if err != nil {
		return doc
	}
	return out
}

// ScheduleRef names one definition of a runtime schedule: its version (1
// when first put, one more with each change) and when its id was first
// put, which tells a schedule deleted and put again from the one before.
// The HTTP API's ETag is its String in quotes.
type ScheduleRef struct {
	Version int64
	Created time.Time
}

// IsZero reports whether r names no definition (a job of the list).
func (r ScheduleRef) IsZero() bool { return r.Version <= 0 || r.Created.IsZero() }

// String is "VERSION-CREATED", CREATED in unix milliseconds ("" when
// IsZero).
func (r ScheduleRef) String() string {
	if r.IsZero() {
		return ""
	}
	return strconv.FormatInt(r.Version, 10) + "-" + strconv.FormatInt(r.Created.UnixMilli(), 10)
}

// ParseScheduleRef reads what String wrote.
func ParseScheduleRef(s string) (ScheduleRef, error) {
	v, c, ok := strings.Cut(s, "-")
	version, err1 := strconv.ParseInt(v, 10, 64)
	created, err2 := strconv.ParseInt(c, 10, 64)
	if !ok || err1 != nil || err2 != nil || version <= 0 || created <= 0 || strconv.FormatInt(version, 10) != v || strconv.FormatInt(created, 10) != c {
		return ScheduleRef{}, fmt.Errorf("schedule definition %q is not VERSION-CREATED (two positive integers)", s)
	}
	return ScheduleRef{Version: version, Created: time.UnixMilli(created).UTC()}, nil
}
