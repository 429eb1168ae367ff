package roster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/jobs"
)

// rosterEntry is a replica's JSON entry in the roster: its Member and the
// entry's format version.
type rosterEntry struct {
	V int `json:"v"` // formats.RosterEntry (absent: 1)
	// StartedMS is Member.Started in unix ms (absent until known, and from
	// older versions).
	StartedMS int64 `json:"started_ms,omitempty"`
	// FirstMS is Member.FirstSeen in unix ms (absent until known, and from
	// older versions).
	FirstMS int64 `json:"first_ms,omitempty"`
	Member
}

// BeatEvery is how often a replica publishes itself in the roster.
const BeatEvery = 2 * time.Second

// LiveWindow is how recently a member must have been seen to count as live:
// three heartbeats.
const LiveWindow = 3 * BeatEvery

// rosterForget is how long a member that stopped beating stays listed (as
// gone) before it is removed.
const rosterForget = 10 * time.Minute

// rosterKeep is how long the roster's keys outlive the last heartbeat. It
// is well above rosterForget, since a key expires by the queue Redis's
// clock: a step forward beyond it drops the whole roster at once.
const rosterKeep = 24 * time.Hour

// stepBound is how far TIME may move beyond the monotonic interval a
// replica measured between two readings before the move counts as a step.
const stepBound = time.Second

// StepSuspend is how long after a step no liveness verdict is made: every
// live member has beaten under the new clock by then.
const StepSuspend = LiveWindow + BeatEvery

// CallBound bounds how long a roster call takes to reach Redis, for
// the latest TIME a script may expect; a slower call is taken as a step
// (no verdict for StepSuspend: the safe side).
const CallBound = 5 * time.Second

// Member is one replica as the roster shows it.
type Member struct {
	// ID is the replica id.
	ID string `json:"-"`
	// Version is the baton version it runs.
	Version string `json:"version"`
	// Role is "run" (scheduler and worker), "worker" or "scheduler".
	Role string `json:"role"`
	// Queues are the asynq queues its worker consumes; empty for a
	// scheduler-only replica (it runs local jobs only).
	Queues []string `json:"queues"`
	// Hash identifies its job list (listHash).
	Hash string `json:"hash"`
	// SkewMS is how far its clock was ahead of the queue Redis's (negative:
	// behind) at its previous heartbeat, in milliseconds, to within half a
	// round trip.
	SkewMS int64 `json:"skew_ms"`
	// Process identifies the OS process that publishes the entry (random,
	// drawn once per process): two live entries of one id from different
	// processes are two processes running under one replica id.
	Process string `json:"process,omitempty"`
	// MaxRuns is the max_runs of each job of its list that has one (a
	// job not named has no limit). Published from entry format 2 on;
	// LimitsKnown says whether the entry had it.
	MaxRuns map[string]int `json:"max_runs,omitempty"`
	// Handlers are the names of the Go handlers its process registers,
	// sorted: its worker runs a runtime schedule's handler job only if it
	// has the handler (Runs). Absent from older versions, which run no
	// runtime schedule.
	Handlers []string `json:"handlers,omitempty"`
	// HTTPPrefixes are the digests of its schedules.http_prefixes, one per
	// prefix (PrefixDigests): its worker runs a runtime schedule's http job
	// only if the job's URL lies under one of them (Runs).
	HTTPPrefixes []string `json:"http_prefixes,omitempty"`
	// LimitsKnown is true when the entry publishes MaxRuns (its version
	// does); false for older versions, whose limits are unknown.
	LimitsKnown bool `json:"-"`
	// Newer is the format version of its entry when that is newer than
	// this release reads (formats.RosterEntry), else 0. Of such an entry
	// only the id and the heartbeat are taken: the replica counts as live
	// while it beats, its job list, queues, handlers and limits are
	// unknown, and Runs says it may run any task (handed back to it, never
	// archived for want of a runner).
	Newer int `json:"-"`
	// Seen is its last heartbeat, by the queue Redis's clock.
	Seen time.Time `json:"-"`
	// Started is when its worker started, by the queue Redis's clock: its
	// first heartbeat that landed, less the time since the worker began
	// (which runs tasks whether its heartbeats land or not), so that no
	// run of this worker began before it. Zero before its second heartbeat
	// and for older versions.
	Started time.Time `json:"-"`
	// FirstSeen is when its first heartbeat landed, by the queue Redis's
	// clock: certainly after its process began (Started is before, by as
	// much as that heartbeat's reply took). Zero as Started is.
	FirstSeen time.Time `json:"-"`
	// Live is true if it was seen within LiveWindow of the read.
	Live bool `json:"-"`
	// Jobs is its job list; nil if the list could not be read.
	Jobs map[string]ListedJob `json:"-"`

	// key is its entry in the roster: "ID#instance", one per worker (a
	// config reload runs a second worker of the same replica id for a
	// moment, and each must see the other).
	key string
}

// ListedJob is one job of a replica's job list as the roster keeps it.
type ListedJob struct {
	// Mode is the job's mode.
	Mode config.Mode
	// Queue is its asynq queue (cron mode), else empty.
	Queue string
	// Digest identifies the job's definition (with secrets masked: a change
	// of a secret value alone does not change it).
	Digest string
}

func (l ListedJob) String() string {
	return string(l.Mode) + " " + l.Queue + " " + l.Digest
}

func parseListedJob(s string) (ListedJob, bool) {
	f := strings.Split(s, " ")
	if len(f) != 3 {
		return ListedJob{}, false
	}
	return ListedJob{Mode: config.Mode(f[0]), Queue: f[1], Digest: f[2]}, true
}

// runs reports whether m's worker runs a queued task t from queue q (see
// Runs).
func (m *Member) runs(t Task, q string) bool { return Runs(m, t, q) }

// ListJobs returns cfg's job list as the roster publishes it.
func ListJobs(cfg *config.Config) map[string]ListedJob {
	out := make(map[string]ListedJob, len(cfg.Jobs))
	for i := range cfg.Jobs {
		j := &cfg.Jobs[i]
		l := ListedJob{Mode: j.Mode, Digest: jobDigest(cfg, j)}
		if j.Mode == config.ModeCron {
			l.Queue = j.Queue
		}
		out[j.Name] = l
	}
	return out
}

// jobDigest hashes j's definition as `baton validate` prints it (secrets
// masked), so a digest in Redis reveals nothing a printed config would not.
func jobDigest(cfg *config.Config, j *config.Job) string {
	// the days of its calendars decide its ticks as its spec does
	sum := sha256.Sum256([]byte(cfg.JobDefinition(j)))
	return hex.EncodeToString(sum[:6])
}

// ListHash returns the hash that names cfg's job list in the roster and in
// `baton status`: replicas with equal lists have equal hashes.
func ListHash(cfg *config.Config) string { return listHash(ListJobs(cfg)) }

// listHash returns the hash that names a job list: equal lists, equal
// hashes.
func listHash(list map[string]ListedJob) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(list)) {
		fmt.Fprintf(h, "%s %s\n", name, list[name])
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

func encodeList(list map[string]ListedJob) string {
	m := make(map[string]string, len(list))
	for k, v := range list {
		m[k] = v.String()
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func decodeList(s string) (map[string]ListedJob, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	out := make(map[string]ListedJob, len(m))
	for k, v := range m {
		l, ok := parseListedJob(v)
		if !ok {
			return nil, fmt.Errorf("job %q: bad entry %q", k, v)
		}
		out[k] = l
	}
	return out, nil
}

// clockWatch keeps a replica's previous reading of the queue Redis's clock,
// to tell a step of that clock from time passing.
type clockWatch struct {
	mu   sync.Mutex
	prev clockReading // zero before the first reading
}

// clockReading is one TIME reply: TIME was read between sent and recv (with
// their monotonic readings).
type clockReading struct {
	redisMS    int64
	sent, recv time.Time
}

// expect returns the range of TIME, in ms, a call sent at sent may see if
// the clock did not step since the previous reading: 0, 0 before it.
func (c *clockWatch) expect(sent time.Time) (lo, hi int64) {
	c.mu.Lock()
	p := c.prev
	c.mu.Unlock()
	if p.redisMS == 0 {
		return 0, 0
	}
	lo = p.redisMS + (sent.Sub(p.recv) - stepBound).Milliseconds()
	hi = p.redisMS + (sent.Sub(p.sent) + CallBound + stepBound).Milliseconds()
	return max(lo, 1), hi
}

// observe records a reading and reports whether it shows a step since the
// previous one: TIME moved by more than stepBound beyond the interval
// between the two calls.
func (c *clockWatch) observe(r clockReading) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.prev
	if p.redisMS == 0 || r.recv.After(p.recv) {
		c.prev = r
	}
	if p.redisMS == 0 {
		return false
	}
	moved := time.Duration(r.redisMS-p.redisMS) * time.Millisecond
	return moved < r.sent.Sub(p.recv)-stepBound || moved > r.recv.Sub(p.sent)+stepBound
}

// stepped records a step seen after the call (one too small for the
// script's range to catch): verdicts are suspended from now on.
func (r *Roster) stepped(ctx context.Context) error {
	k := Keys(r.ns)[2]
	if err := r.rdb.Set(ctx, k, "1", StepSuspend).Err(); err != nil {
		return fmt.Errorf("roster: record a step of the queue Redis's clock: %w", err)
	}
	return nil
}

var (
	//go:embed lua/roster_beat.lua
	rosterBeatSrc string
	rosterBeat    = redis.NewScript(rosterBeatSrc)
	//go:embed lua/roster_leave.lua
	rosterLeaveSrc string
	rosterLeave    = redis.NewScript(rosterLeaveSrc)
	//go:embed lua/roster_read.lua
	rosterReadSrc string
	rosterRead    = redis.NewScript(rosterReadSrc)
)

// Roster publishes one replica and reads the others.
type Roster struct {
	rdb  redis.UniversalClient
	ns   string
	self Member
	list map[string]ListedJob
	log  *slog.Logger
	// born is when the roster was made, by this process's monotonic clock:
	// its worker starts right after, and runs tasks whether or not a
	// heartbeat lands (see Member.Started)
	born time.Time

	clock clockWatch

	mu     sync.Mutex
	last   []Member                        // as of the last heartbeat
	lists  map[string]map[string]ListedJob // job list hash -> list (immutable)
	warned map[string]bool                 // list hashes and "#"+processes already warned about
	// written is the entry JSON of the last heartbeat: leave removes the
	// entry only while it is still that
	written atomic.Value
}

// New returns the roster as self publishes it on the queue Redis rdb:
// self's job list, limits and allowed URL prefixes come from cfg, its Go
// handlers from self.Handlers. Nothing is written until Beat.
func New(rdb redis.UniversalClient, cfg *config.Config, self Member, log *slog.Logger) *Roster {
	list := ListJobs(cfg)
	self.Hash = listHash(list)
	self.Handlers = slices.Compact(slices.Sorted(slices.Values(self.Handlers)))
	self.HTTPPrefixes = PrefixDigests(cfg.Schedules.HTTPPrefixes)
	for i := range cfg.Jobs {
		if j := &cfg.Jobs[i]; j.MaxRuns > 0 {
			if self.MaxRuns == nil {
				self.MaxRuns = map[string]int{}
			}
			self.MaxRuns[j.Name] = j.MaxRuns
		}
	}
	self.Jobs = list
	self.key = self.ID + "#" + randomInstance()
	if self.Process == "" {
		self.Process = thisProcess()
	}
	return &Roster{rdb: rdb, ns: cfg.Namespace, self: self, list: list, log: log, born: time.Now(),
		lists:  map[string]map[string]ListedJob{self.Hash: list},
		warned: map[string]bool{}}
}

// Beat publishes this replica and returns the roster as read at once after.
func (r *Roster) Beat(ctx context.Context) ([]Member, error) {
	entry := rosterEntry{V: formats.RosterEntry, Member: r.self}
	if !r.self.Started.IsZero() {
		entry.StartedMS, entry.FirstMS = r.self.Started.UnixMilli(), r.self.FirstSeen.UnixMilli()
	}
	me, _ := json.Marshal(entry)
	r.written.Store(string(me))
	sent := time.Now() // the wall clock: skew is about the host's clock
	lo, hi := r.clock.expect(sent)
	args := []any{r.self.key, string(me), r.self.Hash, "", rosterForget.Milliseconds(),
		lo, hi, StepSuspend.Milliseconds(), rosterKeep.Milliseconds()}
	res, err := rosterBeat.Run(ctx, r.rdb, Keys(r.ns), args...).Slice()
	if err == nil && len(res) > 0 && res[0] == int64(-1) { // the list is not stored yet
		args[3] = encodeList(r.list)
		res, err = rosterBeat.Run(ctx, r.rdb, Keys(r.ns), args...).Slice()
	}
	if err != nil {
		return nil, fmt.Errorf("roster heartbeat: %w", err)
	}
	recv := time.Now()
	if len(res) > 0 {
		if now, ok := res[0].(int64); ok && now > 0 {
			mid := sent.Add(recv.Sub(sent) / 2)
			r.self.SkewMS = mid.Sub(time.UnixMilli(now)).Milliseconds()
		}
	}
	if err := r.watch(ctx, res, sent); err != nil {
		return nil, err
	}
	ms, err := r.members(ctx, res)
	if err == nil || errors.Is(err, jobs.ErrCorrupt) {
		r.mu.Lock()
		r.last = ms
		r.mu.Unlock()
		if i := slices.IndexFunc(ms, func(m Member) bool { return m.key == r.self.key }); i >= 0 && r.self.Started.IsZero() {
			// when the worker started, by the queue Redis's clock: this
			// heartbeat's time less the time since (its answer came at
			// recv), no later than a run the worker began while its
			// earlier heartbeats failed
			r.self.Started = ms[i].Seen.Add(-recv.Sub(r.born))
			r.self.FirstSeen = ms[i].Seen
		}
	}
	return ms, err
}

// DefinedDifferently returns the id of a live replica (as of the last
// heartbeat) whose job list has job in cron mode with another definition
// than this replica's (its digest differs), and whose worker consumes the
// job's queue; "" if there is none.
func (r *Roster) DefinedDifferently(job string) string {
	mine, ok := r.list[job]
	if !ok {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.last {
		if m.key == r.self.key || !m.Live {
			continue
		}
		if j, ok := m.Jobs[job]; ok && j.Digest != mine.Digest && m.runs(Task{Job: job}, mine.Queue) {
			return m.ID
		}
	}
	return ""
}

// thisProcess is this process's Member.Process: one value for every
// replica of the process (a config reload runs two workers of one id in one
// process for a moment, which is no duplicate).
var thisProcess = sync.OnceValue(randomInstance)

// randomInstance names one worker's roster entry.
func randomInstance() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Leave removes this worker from the roster (a graceful stop), unless its
// entry was rewritten since (by another process that read the roster).
func (r *Roster) Leave(ctx context.Context) error {
	me, _ := r.written.Load().(string)
	return rosterLeave.Run(ctx, r.rdb, Keys(r.ns)[:1], r.self.key, me).Err()
}

// watch checks a roster script's reply, read by a call sent at sent,
// against the previous one: a step the script did not record (TIME moved
// less than its range allows, more than stepBound) is recorded now, and
// the reply marked suspended.
func (r *Roster) watch(ctx context.Context, res []any, sent time.Time) error {
	if len(res) < 2 {
		return nil
	}
	now, _ := res[0].(int64)
	if now <= 0 {
		return nil
	}
	if !r.clock.observe(clockReading{redisMS: now, sent: sent, recv: time.Now()}) || res[1] == int64(1) {
		return nil
	}
	if err := r.stepped(ctx); err != nil {
		return err
	}
	res[1] = int64(1)
	return nil
}

// read returns the roster now, and whether its liveness verdicts are
// suspended by a step of the queue Redis's clock (then every member counts
// as live, and none is left out as forgotten).
func (r *Roster) read(ctx context.Context) ([]Member, bool, error) {
	sent := time.Now()
	lo, hi := r.clock.expect(sent)
	res, err := rosterRead.Run(ctx, r.rdb, Keys(r.ns), rosterForget.Milliseconds(),
		lo, hi, StepSuspend.Milliseconds()).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("read the roster: %w", err)
	}
	if err := r.watch(ctx, res, sent); err != nil {
		return nil, false, err
	}
	ms, err := r.members(ctx, res)
	return ms, err == nil && res[1] == int64(1), err
}

// Read returns the replicas of namespace ns on the queue Redis rdb,
// sorted by id, with their job lists. For a while after a replica saw the
// queue Redis's clock step (a heartbeat round under the new clock), every
// member counts as live.
func Read(ctx context.Context, rdb redis.UniversalClient, ns string) ([]Member, error) {
	res, err := rosterRead.Run(ctx, rdb, Keys(ns), rosterForget.Milliseconds(), 0, 0, StepSuspend.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("read the roster: %w", err)
	}
	r := &Roster{rdb: rdb, ns: ns, lists: map[string]map[string]ListedJob{}}
	return r.members(ctx, res)
}

// members decodes a script's answer {now ms, suspended, id, "seen json",
// ...} and fills in the job lists (cached by hash; one HMGET for the
// missing ones). While suspended, every member is live.
// Entries and job lists that do not decode are left out and reported: the
// members read come with an error wrapping jobs.ErrCorrupt that names the key
// and the field (a live replica must not silently look absent, or listing
// no jobs).
func (r *Roster) members(ctx context.Context, res []any) ([]Member, error) {
	if len(res) < 2 || len(res)%2 != 0 {
		return nil, errors.New("roster: malformed reply")
	}
	now, _ := res[0].(int64)
	suspended := res[1] == int64(1)
	var out []Member
	var corrupt []error
	for i := 2; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		v, _ := res[i+1].(string)
		seen, js, ok := strings.Cut(v, " ")
		ms, okSeen := quorum.ParseCounter(seen)
		var e rosterEntry
		// a newer entry's members may mean something else: read nothing
		// but its version (before the members, which may not even decode
		// as this release's)
		if v := formats.VersionOf([]byte(js)); ok && okSeen && v > formats.RosterEntry {
			formats.Warn(r.log, formats.Check("roster entry", formats.RosterEntry, v).(*formats.NewerError),
				"its replica counts as live while it beats, its job list unknown: tasks this replica cannot run are handed back to it, never archived")
			out = append(out, entryMember(id, ms, now, suspended, Member{Newer: v}))
			continue
		}
		if !ok || !okSeen || json.Unmarshal([]byte(js), &e) != nil {
			corrupt = append(corrupt, &jobs.CorruptError{Key: Keys(r.ns)[0], Field: "member " + strconv.Quote(id), Value: redact.Cut(v),
				Want: "a roster entry (\"<seen ms> <JSON>\")"})
			continue
		}
		m := e.Member
		m.LimitsKnown = e.V >= 2
		if e.StartedMS > 0 {
			m.Started = time.UnixMilli(e.StartedMS)
		}
		if e.FirstMS > 0 {
			m.FirstSeen = time.UnixMilli(e.FirstMS)
		}
		out = append(out, entryMember(id, ms, now, suspended, m))
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })

	r.mu.Lock()
	var missing []string
	for _, m := range out {
		if _, ok := r.lists[m.Hash]; !ok && m.Newer == 0 && !slices.Contains(missing, m.Hash) {
			missing = append(missing, m.Hash)
		}
	}
	r.mu.Unlock()
	if len(missing) > 0 {
		vals, err := r.rdb.HMGet(ctx, Keys(r.ns)[1], missing...).Result()
		if err != nil {
			return nil, fmt.Errorf("read the roster's job lists: %w", err)
		}
		r.mu.Lock()
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			l, err := decodeList(s)
			if err != nil {
				corrupt = append(corrupt, &jobs.CorruptError{Key: Keys(r.ns)[1], Field: "list " + strconv.Quote(missing[i]), Value: redact.Cut(s),
					Want: fmt.Sprintf("a job list (%v)", err)})
				continue
			}
			if len(r.lists) > 64 { // a bound: hashes of long-gone lists
				clear(r.lists)
				r.lists[r.self.Hash] = r.list
			}
			r.lists[missing[i]] = l
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	for i := range out {
		if out[i].Newer == 0 {
			out[i].Jobs = r.lists[out[i].Hash]
		}
	}
	r.mu.Unlock()
	if len(corrupt) > 0 {
		return out, fmt.Errorf("roster: %w", errors.Join(corrupt...))
	}
	return out, nil
}

// entryMember is m, read from entry id seen at ms, as of now (unix ms, the
// queue Redis's clock): its key, id, last heartbeat and liveness.
func entryMember(id string, ms, now int64, suspended bool, m Member) Member {
	m.key = id
	m.ID, _, _ = strings.Cut(id, "#")
	m.Seen = time.UnixMilli(ms)
	m.Live = suspended || now-ms <= LiveWindow.Milliseconds()
	return m
}

// Stale reports whether a roster read by one of its own members shows no
// live member at all: the reader's own entry is fresh unless the queue
// Redis's clock stepped forward since (before any replica's heartbeat saw
// it) or the reader's heartbeats fail, and either way no member may be
// taken as dead. Not for display: a roster of replicas that all died
// shows them dead.
func Stale(members []Member) bool {
	return len(members) > 0 && !slices.ContainsFunc(members, func(m Member) bool { return m.Live })
}

// ListDiff is how one job differs between job lists.
type ListDiff struct {
	// Job is the job's name.
	Job string
	// By maps each distinct definition ("" for "not in the list", else
	// "mode queue digest") to the ids of the live replicas that have it.
	By map[string][]string
}

// String formats d for a log line or status: `report: absent on a; cron
// default 1f2e3d on b, c`.
func (d ListDiff) String() string {
	// job names, replica ids and definitions were read from Redis: quoted
	var parts []string
	for _, def := range slices.Sorted(maps.Keys(d.By)) {
		what := redact.Quote(def)
		if def == "" {
			what = "absent"
		}
		ids := make([]string, len(d.By[def]))
		for i, id := range d.By[def] {
			ids[i] = redact.Quote(id)
		}
		parts = append(parts, what+" on "+strings.Join(ids, ", "))
	}
	return redact.Quote(d.Job) + ": " + strings.Join(parts, "; ")
}

// DiffLists returns the jobs on which the live members' job lists differ,
// sorted by job name; nil when they agree. Members whose list could not be
// read are left out.
func DiffLists(members []Member) []ListDiff {
	var live []Member
	hashes := map[string]bool{}
	for _, m := range members {
		if m.Live && m.Jobs != nil {
			live = append(live, m)
			hashes[m.Hash] = true
		}
	}
	if len(hashes) < 2 {
		return nil
	}
	names := map[string]bool{}
	for _, m := range live {
		for n := range m.Jobs {
			names[n] = true
		}
	}
	var out []ListDiff
	for _, n := range slices.Sorted(maps.Keys(names)) {
		by := map[string][]string{}
		for _, m := range live {
			def := ""
			if j, ok := m.Jobs[n]; ok {
				def = j.String()
			}
			by[def] = append(by[def], m.ID)
		}
		if len(by) > 1 {
			out = append(out, ListDiff{Job: n, By: by})
		}
	}
	return out
}

// WarnDiffering logs, once per other job list, that live replicas run a job
// list different from this one's, and on which jobs.
func (r *Roster) WarnDiffering(members []Member) {
	for _, m := range members {
		if !m.Live || m.Jobs == nil || m.Hash == r.self.Hash {
			continue
		}
		r.mu.Lock()
		seen := r.warned[m.Hash]
		r.warned[m.Hash] = true
		r.mu.Unlock()
		if seen {
			continue
		}
		pair := []Member{{ID: r.self.ID, Hash: r.self.Hash, Live: true, Jobs: r.list}, m}
		var diffs []string
		for _, d := range DiffLists(pair) {
			diffs = append(diffs, d.String())
		}
		r.log.Warn("a live replica runs a different job list (normal during a rolling deploy; tasks either list cannot run are handed to a replica that can)",
			slog.String("replica", r.self.ID), slog.String("list", r.self.Hash),
			slog.String("other", m.ID), slog.String("other_list", m.Hash), slog.String("other_version", m.Version),
			slog.Any("jobs", diffs))
	}
}

// DuplicateIDs returns, sorted, the replica ids under which more than one
// live process publishes itself: each such id is a configuration mistake
// (two processes given one --id), which makes the roster, lock holder
// records and metrics mix the two up. A process restarted under its id
// while its dead predecessor's entry still counts as live is none: the two
// entries never beat at the same time (see overlapped).
func DuplicateIDs(members []Member) []string {
	var out []string
	for i, a := range members {
		for _, b := range members[i+1:] {
			if a.ID == b.ID && duplicates(a, b) && !slices.Contains(out, a.ID) {
				out = append(out, a.ID)
			}
		}
	}
	slices.Sort(out)
	return out
}

// duplicates reports whether a and b are live entries of one id published
// by two processes that ran at the same time.
func duplicates(a, b Member) bool {
	return a.Live && b.Live && a.Process != "" && b.Process != "" && a.Process != b.Process && overlapped(a, b)
}

// overlapped reports whether each of a and b beat after the other's first
// heartbeat (its last one when its first is not known yet): a process that
// died before the other started never did. The first heartbeat's own time,
// not Started: Started is earlier than the process by up to that
// heartbeat's reply time (on a loaded machine, milliseconds in which its
// predecessor beat its last). After, not at: the times are the queue
// Redis's, in milliseconds, and a process restarted at once under its id
// beats first in the millisecond of its predecessor's last beat as often
// as not; two processes that do run together beat again in later
// milliseconds.
func overlapped(a, b Member) bool {
	since := func(m Member) time.Time {
		switch {
		case !m.FirstSeen.IsZero():
			return m.FirstSeen
		case !m.Started.IsZero():
			return m.Started // an older version's entry
		}
		return m.Seen
	}
	return a.Seen.After(since(b)) && b.Seen.After(since(a))
}

// WarnDuplicate logs, once per other process, that another live process publishes
// itself under this replica's id. Both processes see the other and warn.
func (r *Roster) WarnDuplicate(members []Member) {
	i := slices.IndexFunc(members, func(m Member) bool { return m.key == r.self.key })
	if i < 0 {
		return
	}
	self := members[i]
	for _, m := range members {
		if m.ID != r.self.ID || !duplicates(self, m) {
			continue
		}
		r.mu.Lock()
		seen := r.warned["#"+m.Process]
		r.warned["#"+m.Process] = true
		r.mu.Unlock()
		if seen {
			continue
		}
		r.log.Warn("another live process runs under this replica id: give each process its own id (baton --id or BATON_ID, baton.WithReplicaID), or the roster, lock holder records and metrics mix the two up",
			slog.String("replica", r.self.ID), slog.String("other_version", m.Version), slog.String("other_role", m.Role))
	}
}
