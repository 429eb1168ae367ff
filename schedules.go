package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/internal/strictyaml"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// Schedules made at runtime: jobs defined through Cluster.PutSchedule,
// `baton schedules put` or PUT /api/schedules/ID and kept in the queue
// Redis. A runtime schedule is a job like the job list's, named "@" + its
// id, claimed, dispatched and run on the same path: every replica follows
// the stored schedules (schedstore.Follower) and puts them into its
// scheduler (applySchedules) and, through its config's source
// (config.WithSource), into every lookup of a job by name.

// ErrNoSchedule is returned for a runtime schedule that does not exist.
var ErrNoSchedule = schedstore.ErrNotFound

// ErrScheduleChanged is returned by a put conditioned on a version
// (ScheduleSpec's IfVersion) that the schedule no longer has.
var ErrScheduleChanged = schedstore.ErrChanged

// ScheduleSpec is a runtime schedule's definition: the fields of a job of
// the job list (config.Job) that a runtime schedule may set, each left at
// its zero value for the list's default. It runs a registered Go handler
// (Handler, with Payload) or an http request (HTTP) to a URL under one of
// the config's schedules.http_prefixes; never a command.
type ScheduleSpec struct {
	Schedule      string // a cron spec; or At
	At            time.Time
	Timezone      string
	DST           config.DST // vixie (default), once, skip or both
	Exclude, Only []string   // calendars of the job list (config.Calendars)
	Start, End    time.Time
	MaxRuns       int
	Concurrency   config.Concurrency
	Limit         string // a limit of the job list (config.Limits)
	// After names the jobs it runs after (a chain): jobs of the list, or
	// runtime schedules as "@" + id; then it has no Schedule of its own.
	After            []string
	OnParentFailure  config.ParentFailure // skip (default) or run
	BufferMax        int
	Catchup          config.Catchup
	CatchupMax       int
	StartingDeadline time.Duration
	Jitter           time.Duration
	Timeout          time.Duration
	MaxRetry         *int // nil: the default
	RetryBackoff     time.Duration
	LockTTL          time.Duration
	Queue            string
	Handler          string          // a Go handler's registered name
	Payload          json.RawMessage // handed to the handler as Run.Payload
	HTTP             *config.HTTPSpec
}

// Document returns spec as a definition with the job list's keys (JSON):
// what PutScheduleDocument takes and GetSchedule gives back.
func (s ScheduleSpec) Document() (json.RawMessage, error) {
	m := map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	rfc := func(t time.Time) string { return t.Format(time.RFC3339) }
	dur := strictyaml.FormatDuration
	set("schedule", s.Schedule, s.Schedule != "")
	set("at", rfc(s.At), !s.At.IsZero())
	set("timezone", s.Timezone, s.Timezone != "")
	set("dst", s.DST, s.DST != "")
	set("exclude", s.Exclude, len(s.Exclude) > 0)
	set("only", s.Only, len(s.Only) > 0)
	set("start", rfc(s.Start), !s.Start.IsZero())
	set("end", rfc(s.End), !s.End.IsZero())
	set("max_runs", s.MaxRuns, s.MaxRuns != 0)
	set("concurrency", s.Concurrency, s.Concurrency != "")
	set("limit", s.Limit, s.Limit != "")
	set("after", s.After, len(s.After) > 0)
	set("on_parent_failure", s.OnParentFailure, s.OnParentFailure != "")
	set("buffer_max", s.BufferMax, s.BufferMax != 0)
	set("catchup", s.Catchup, s.Catchup != "")
	set("catchup_max", s.CatchupMax, s.CatchupMax != 0)
	set("starting_deadline", dur(s.StartingDeadline), s.StartingDeadline != 0)
	set("jitter", dur(s.Jitter), s.Jitter != 0)
	set("timeout", dur(s.Timeout), s.Timeout != 0)
	if s.MaxRetry != nil {
		m["max_retry"] = *s.MaxRetry
	}
	set("retry_backoff", dur(s.RetryBackoff), s.RetryBackoff != 0)
	set("lock_ttl", dur(s.LockTTL), s.LockTTL != 0)
	set("queue", s.Queue, s.Queue != "")
	if s.Handler != "" || len(s.Payload) > 0 {
		h := map[string]any{"name": s.Handler}
		if len(s.Payload) > 0 {
			if !json.Valid(s.Payload) {
				return nil, &config.Error{Errors: []config.FieldError{{Field: "handler.payload", Msg: "not valid JSON"}}}
			}
			h["payload"] = s.Payload
		}
		m["handler"] = h
	}
	if s.HTTP != nil {
		h := map[string]any{"url": s.HTTP.URL}
		set := func(k string, v any, ok bool) {
			if ok {
				h[k] = v
			}
		}
		set("method", s.HTTP.Method, s.HTTP.Method != "")
		set("headers", s.HTTP.Headers, len(s.HTTP.Headers) > 0)
		set("body", s.HTTP.Body, s.HTTP.Body != "")
		set("expect_status", s.HTTP.ExpectStatus, len(s.HTTP.ExpectStatus) > 0)
		m["http"] = h
	}
	return json.Marshal(m)
}

// Schedule is a stored runtime schedule.
type Schedule struct {
	ID         string          `json:"id"`
	Job        string          `json:"job"`        // its job name: "@" + ID
	Definition json.RawMessage `json:"definition"` // as put: the job list's keys
	Created    time.Time       `json:"created"`    // when the id was first put, by Redis's clock (after a deleted one of the same id)
	Updated    time.Time       `json:"updated"`    // when this definition was put
	// Version counts the schedule's own changes: 1 when first put, one
	// more with each put that changes its definition (for a conditional
	// put; a schedule deleted and put again starts at 1 again, which
	// ETag tells apart).
	Version int64 `json:"version"`
	// Change is the change of the schedule's shard that put it (changes
	// count every put and delete of the shard's schedules): a replica whose
	// ScheduleChange(ID) reached it follows this definition or a newer one.
	Change int64       `json:"change"`
	Paused *PauseNote  `json:"paused,omitempty"`
	Next   []time.Time `json:"next,omitempty"` // its next ticks, when asked for
	// Error says why replicas refuse to run the stored definition (not
	// signed as the keys require, no longer valid for the config); a
	// listing gives such schedules too.
	Error string `json:"error,omitempty"`
	// Waiting says why no live replica can run it now (no live replica
	// registers its Go handler, allows its URL or consumes its queue): it
	// was put ahead of a deploy (AheadOfDeploy), or the replicas that ran
	// it are gone. Its ticks are refused meanwhile.
	Waiting string `json:"waiting,omitempty"`
	// FailingSince is when its runs began to fail (failed, timed out,
	// lease lost) or its ticks to be refused, while its newest one did;
	// nil when it does not fail.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// Recent are its newest runs and not-run ticks, newest first, as its
	// history keeps them (ScheduleQuery.Runs; GetSchedule always);
	// FailureStreak how many of its runs failed in a row, LastSuccess its
	// newest success the history holds (kept beyond the count: see
	// RunRecord.Kept).
	Recent        []jobs.RunRecord `json:"recent,omitempty"`
	FailureStreak int              `json:"failure_streak,omitempty"`
	LastSuccess   *time.Time       `json:"last_success,omitempty"`
}

// ScheduleQuery selects a page of runtime schedules, in id order.
type ScheduleQuery struct {
	Prefix string // only ids that start with it
	After  string // only ids after it (the previous page's Next)
	Limit  int    // at most this many; default 100, at most 1000
	Next   int    // the next ticks of each, up to 10 (default 0)
	// Runs fills in each schedule's newest runs (Schedule.Recent), its
	// failure streak and last success, from its history (one more read).
	Runs bool
}

// SchedulePage is one page of a listing.
type SchedulePage struct {
	Schedules []Schedule `json:"schedules"`
	// Next is the After of the next page; "" after the last.
	Next string `json:"next,omitempty"`
}

// scheduleStore is the cluster's store of runtime schedules.
func (c *Cluster) scheduleStore() *schedstore.Store { return c.schedules }

// writableStore is the store of runtime schedules, once the config's
// layout is found to be the namespace's (one read before each write: a
// baton init may have moved the namespace to another since this Cluster
// was made): a put into a shard the replicas do not read would never run.
func (c *Cluster) writableStore(ctx context.Context) (*schedstore.Store, error) {
	if err := layout.Check(ctx, c.queue, c.cfg); err != nil {
		return nil, err
	}
	return c.schedules, nil
}

// PutSchedule creates or replaces runtime schedule id with spec, after the
// checks of a job of the list (a *config.Error naming each field and
// why) and of the runtime rules (see config.DecodeSchedule), and only
// when a live replica can run it (else ErrNoRunner; see AheadOfDeploy).
// Every running replica follows within a second.
func (c *Cluster) PutSchedule(ctx context.Context, id string, spec ScheduleSpec, opts ...PutOption) (Schedule, error) {
	doc, err := spec.Document()
	if err != nil {
		return Schedule{}, err
	}
	return c.PutScheduleDocument(ctx, id, doc, opts...)
}

// PutScheduleDocument is PutSchedule with the definition as YAML or JSON,
// with the keys of a job of the list but name.
func (c *Cluster) PutScheduleDocument(ctx context.Context, id string, doc []byte, opts ...PutOption) (Schedule, error) {
	return c.putSchedule(ctx, id, doc, schedstore.Any, opts)
}

// PutScheduleIfVersion is PutScheduleDocument that puts only if the
// schedule is still at version (0: does not exist yet), else fails with
// ErrScheduleChanged: a read-modify-write that loses no other writer's
// change.
func (c *Cluster) PutScheduleIfVersion(ctx context.Context, id string, doc []byte, version int64, opts ...PutOption) (Schedule, error) {
	if version < 0 {
		return Schedule{}, fmt.Errorf("%w: version %d: want 0 (the schedule must not exist yet) or more", ErrBadQuery, version)
	}
	return c.putSchedule(ctx, id, doc, schedstore.Match{Version: version}, opts)
}

// PutScheduleIfMatch is PutScheduleDocument that puts only over the
// schedule whose ETag was etag (Schedule.ETag: this version of it, not one
// deleted and put again since), else fails with ErrScheduleChanged. etag
// may also be a version alone, as PutScheduleIfVersion takes it.
func (c *Cluster) PutScheduleIfMatch(ctx context.Context, id string, doc []byte, etag string, opts ...PutOption) (Schedule, error) {
	m, err := parseETag(etag)
	if err != nil {
		return Schedule{}, err
	}
	return c.putSchedule(ctx, id, doc, m, opts)
}

// CheckETag returns nil when etag can condition a change of one schedule
// (PutScheduleIfMatch, DeleteScheduleIfMatch): a Schedule.ETag,
// "VERSION-CREATED", or a version alone, with or without its quotes; else
// an error wrapping ErrBadQuery. A weak tag (W/...), a list of tags, "*"
// and "" are refused.
func CheckETag(etag string) error {
	_, err := parseETag(etag)
	return err
}

// parseETag reads an ETag of Schedule.ETag, "VERSION-CREATED" (unix ms),
// or a version alone, with or without its quotes. A weak tag (W/...), a
// list of tags or "*" is refused: If-Match compares strongly, and
// conditions one schedule.
func parseETag(etag string) (schedstore.Match, error) {
	s := strings.TrimSpace(etag)
	bad := func() (schedstore.Match, error) {
		return schedstore.Match{}, fmt.Errorf("%w: %q is not a schedule's ETag (\"VERSION-CREATED\", as GET answers it) or version (a whole number; 0: the schedule must not exist yet)", ErrBadQuery, etag)
	}
	if q := strings.HasPrefix(s, `"`); q || strings.HasSuffix(s, `"`) {
		if !q || len(s) < 2 || !strings.HasSuffix(s, `"`) {
			return bad()
		}
		s = s[1 : len(s)-1]
	}
	v, created, hasCreated := strings.Cut(s, "-")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(v, "+") {
		return bad()
	}
	m := schedstore.Match{Version: n}
	if hasCreated {
		ms, err := strconv.ParseInt(created, 10, 64)
		if err != nil || ms <= 0 || n == 0 || strings.HasPrefix(created, "+") {
			return bad()
		}
		m.Created = time.UnixMilli(ms)
	}
	return m, nil
}

func (c *Cluster) putSchedule(ctx context.Context, id string, doc []byte, match schedstore.Match, opts []PutOption) (Schedule, error) {
	var o putOptions
	for _, opt := range opts {
		opt(&o)
	}
	base, err := c.withCalendars(ctx, doc)
	if err != nil {
		return Schedule{}, err
	}
	job, err := config.DecodeSchedule(base, id, doc, time.Time{})
	if err != nil {
		return Schedule{}, err
	}
	stored, err := config.ScheduleDocument(doc)
	if err != nil {
		return Schedule{}, err
	}
	st, err := c.writableStore(ctx)
	if err != nil {
		return Schedule{}, err
	}
	waiting, err := c.checkRunner(ctx, id, job, o)
	if err != nil {
		return Schedule{}, err
	}
	rec, err := st.Put(ctx, id, stored, match)
	if err != nil {
		return Schedule{}, err
	}
	s := scheduleOf(rec)
	s.Waiting = waiting
	return s, nil
}

// GetSchedule returns runtime schedule id, with its pause and next ticks
// (next of them), or ErrNoSchedule.
func (c *Cluster) GetSchedule(ctx context.Context, id string, next int) (Schedule, error) {
	if err := config.CheckScheduleID(id); err != nil {
		return Schedule{}, err
	}
	rec, err := c.scheduleStore().Get(ctx, id)
	if err != nil {
		return Schedule{}, err
	}
	out := []Schedule{scheduleOf(rec)}
	if err := c.describeSchedules(ctx, out, next); err != nil {
		return Schedule{}, err
	}
	if err := c.scheduleRuns(ctx, out); err != nil {
		return Schedule{}, err
	}
	return out[0], nil
}

// ListSchedules returns a page of the runtime schedules.
func (c *Cluster) ListSchedules(ctx context.Context, q ScheduleQuery) (SchedulePage, error) {
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > 1000:
		return SchedulePage{}, fmt.Errorf("%w: limit %d: want 1 to 1000", ErrBadQuery, q.Limit)
	}
	if q.Next < 0 || q.Next > 10 {
		return SchedulePage{}, fmt.Errorf("%w: next %d: want 0 to 10", ErrBadQuery, q.Next)
	}
	recs, bad, next, err := c.scheduleStore().List(ctx, q.Prefix, q.After, q.Limit)
	if err != nil {
		return SchedulePage{}, err
	}
	page := SchedulePage{Next: next}
	for _, r := range recs {
		page.Schedules = append(page.Schedules, scheduleOf(r))
	}
	for id, err := range bad {
		page.Schedules = append(page.Schedules, Schedule{ID: id, Job: config.ScheduleJobName(id), Error: err.Error()})
	}
	if err := c.describeSchedules(ctx, page.Schedules, q.Next); err != nil {
		return SchedulePage{}, err
	}
	if q.Runs {
		if err := c.scheduleRuns(ctx, page.Schedules); err != nil {
			return SchedulePage{}, err
		}
	}
	return page, nil
}

// Masked returns s as it is shown to readers (the HTTP API, the
// dashboard, the command line): the values of its http headers masked
// in its Definition, as the printed job list's are.
func (s Schedule) Masked() Schedule {
	if s.Definition != nil {
		s.Definition = config.MaskScheduleDocument(s.Definition)
	}
	return s
}

// ErrBadQuery is returned for a listing asked with bad bounds.
var ErrBadQuery = errors.New("baton: bad query")

// DeleteSchedule removes runtime schedule id: no replica claims a tick of
// it after it follows the change (within a second). A run under way
// finishes, unless stopRunning: then every worker running it is asked to
// stop it (as a replace does). Its pause and the count of its runs go
// with it: a schedule put again under the id is not paused, and runs its
// max_runs anew. It returns
// ErrNoSchedule when there was none.
func (c *Cluster) DeleteSchedule(ctx context.Context, id string, stopRunning bool) error {
	return c.deleteSchedule(ctx, id, schedstore.Any, stopRunning)
}

// DeleteScheduleIfMatch is DeleteSchedule that deletes only the schedule
// whose ETag was etag (Schedule.ETag: this version of it, not one deleted
// and put again since; or a version alone), else fails with
// ErrScheduleChanged.
func (c *Cluster) DeleteScheduleIfMatch(ctx context.Context, id, etag string, stopRunning bool) error {
	m, err := parseETag(etag)
	if err != nil {
		return err
	}
	return c.deleteSchedule(ctx, id, m, stopRunning)
}

func (c *Cluster) deleteSchedule(ctx context.Context, id string, match schedstore.Match, stopRunning bool) error {
	if err := config.CheckScheduleID(id); err != nil {
		return err
	}
	st, err := c.writableStore(ctx)
	if err != nil {
		return err
	}
	// each lock master's clock before the delete: the pause that goes with
	// the schedule is one written before it, not the pause of a schedule
	// another caller put again under the id and paused once it was deleted
	before := make([]int64, len(c.masters))
	c.eachMaster(ctx, config.ScheduleJobName(id), false, func(ctx context.Context, m redis.UniversalClient, i int) error {
		if t, err := m.Time(ctx).Result(); err == nil {
			before[i] = t.UnixMilli()
		}
		return nil
	})
	ok, created, err := st.DeleteIf(ctx, id, match)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoSchedule, id)
	}
	// the pause goes with it: a schedule put again under the id is a new
	// one, not paused
	pauseKey := scheduler.PauseKey(c.cfg.Namespace, config.ScheduleJobName(id))
	var kept atomic.Bool
	c.eachMaster(ctx, config.ScheduleJobName(id), false, func(ctx context.Context, m redis.UniversalClient, i int) error {
		if before[i] == 0 {
			return m.Del(ctx, pauseKey).Err() // its clock unread
		}
		left, err := unpauseBeforeScript.Run(ctx, m, []string{pauseKey}, before[i]).Int64()
		if err == nil && left == 0 {
			kept.Store(true)
		}
		return err
	})
	if !kept.Load() {
		c.notePauseOf(ctx, config.ScheduleJobName(id), false, time.Time{}, time.Time{})
	}
	// its skips too (baton skip): their ticks are the new one's to run
	c.unskip(ctx, config.ScheduleJobName(id))
	c.queue.ZRem(ctx, runlog.FailingKey(c.cfg, id), id)
	// its max_runs count goes with it (a schedule put again under this id
	// counts its own: JobRunCountKeys); the count of the id's earlier form
	// too
	counts := handoff.RunCountKeys(c.cfg.Namespace, config.ScheduleJobName(id))
	if !created.IsZero() {
		counts = append(counts, handoff.JobRunCountKeys(c.cfg.Namespace, &config.Job{Name: config.ScheduleJobName(id), Created: created})...)
	}
	c.queue.Del(ctx, counts...)
	if stopRunning {
		return worker.RequestStop(ctx, c.queue, c.cfg, config.ScheduleJobName(id), "deleted", "baton schedules delete")
	}
	return nil
}

// PauseSchedule pauses runtime schedule id (see Pause).
func (c *Cluster) PauseSchedule(ctx context.Context, id string, p PauseNote) (PauseResult, error) {
	if err := config.CheckScheduleID(id); err != nil {
		return PauseResult{}, err
	}
	return c.Pause(ctx, config.ScheduleJobName(id), p)
}

// ResumeSchedule resumes runtime schedule id (see Resume).
func (c *Cluster) ResumeSchedule(ctx context.Context, id string, catchUp bool) (ResumeResult, error) {
	if err := config.CheckScheduleID(id); err != nil {
		return ResumeResult{}, err
	}
	return c.Resume(ctx, config.ScheduleJobName(id), catchUp)
}

// describeSchedules fills in the pause of each schedule, since when it
// fails, why it waits when no live replica can run it, and, with next >
// 0, its next ticks.
func (c *Cluster) describeSchedules(ctx context.Context, ss []Schedule, next int) error {
	if len(ss) == 0 {
		return nil
	}
	names := make([]string, len(ss))
	for i := range ss {
		names[i] = ss[i].Job
	}
	states, err := c.pauseStates(ctx, names)
	if err != nil {
		return err
	}
	members, err := roster.Read(ctx, c.queue, c.cfg.Namespace)
	if err != nil {
		return err
	}
	failing := make([]*redis.FloatCmd, len(ss))
	if _, err := c.queue.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range ss {
			failing[i] = p.ZScore(ctx, runlog.FailingKey(c.cfg, ss[i].ID), ss[i].ID)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("baton: runtime schedules: the failing ones: %w", err)
	}
	base, badCals, err := c.readableCalendars(ctx, definitions(ss)...)
	if err != nil {
		return err
	}
	now := time.Now()
	for i := range ss {
		s := &ss[i]
		if st, ok := states[s.Job]; ok && st.note != nil {
			s.Paused = st.note
		}
		if ms, err := failing[i].Result(); err == nil {
			since := time.UnixMilli(int64(ms)).UTC()
			s.FailingSince = &since
		}
		if s.Error != "" {
			continue
		}
		if err := schedstore.CalendarErrorOf(badCals, s.Definition); err != nil {
			s.Error = err.Error()
			continue
		}
		j, err := config.DecodeSchedule(base, s.ID, s.Definition, s.Created)
		if err != nil {
			s.Error = err.Error()
			continue
		}
		s.Waiting = runnerMissing(j, members)
		for t := now; len(s.Next) < next; {
			if t = j.Sched.Next(t); t.IsZero() {
				break
			}
			s.Next = append(s.Next, t.UTC())
		}
	}
	return nil
}

// scheduleRuns fills in each schedule's newest runs, failure streak and
// last success from its history: one pipelined read.
func (c *Cluster) scheduleRuns(ctx context.Context, ss []Schedule) error {
	if len(ss) == 0 {
		return nil
	}
	names := make([]string, len(ss))
	for i := range ss {
		names[i] = ss[i].Job
	}
	hist, err := history.ReadJobs(ctx, c.queue, c.cfg.Namespace, names, historyScan)
	if err != nil && !errors.Is(err, jobs.ErrCorrupt) {
		return fmt.Errorf("baton: runtime schedules: their runs: %w", err)
	}
	lists := make([][]jobs.RunRecord, 0, len(hist))
	for _, recs := range hist {
		lists = append(lists, recs)
	}
	byJob := make(map[string]*Schedule, len(ss))
	for i := range ss {
		byJob[ss[i].Job] = &ss[i]
	}
	// a schedule naming a calendar in error is not decoded (nil below)
	base, _, err := c.readableCalendars(ctx, definitions(ss)...)
	if err != nil {
		return err
	}
	c.markUnknownRuns(ctx, func(job string) *config.Job {
		// its definition as read (its timeout), decoded only for a run
		// recorded running
		s := byJob[job]
		if s == nil || s.Definition == nil {
			return nil
		}
		j, err := config.DecodeSchedule(base, s.ID, s.Definition, s.Created)
		if err != nil {
			return nil
		}
		return j
	}, lists...)
	for i := range ss {
		recs := hist[ss[i].Job]
		ss[i].Recent = recs
		n, ok := jobs.FailureStreak(recs)
		ss[i].FailureStreak = n
		if ok != nil {
			at := ok.Ended
			if at.IsZero() {
				at = ok.Started
			}
			ss[i].LastSuccess = &at
		}
	}
	return nil
}

// definitions are the definitions of ss.
func definitions(ss []Schedule) [][]byte {
	out := make([][]byte, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Definition)
	}
	return out
}

func scheduleOf(r schedstore.Record) Schedule {
	return Schedule{ID: r.ID, Job: config.ScheduleJobName(r.ID), Definition: r.Doc, Created: r.Created, Updated: r.Updated, Version: r.Version, Change: r.Change}
}

// ETag is the schedule's entity tag: its version and when it was created
// (an HTTP PUT's If-Match takes it back, and puts only over this schedule
// at this version); "" for a schedule not read from the store.
func (s Schedule) ETag() string {
	ref := config.ScheduleRef{Version: s.Version, Created: s.Created}
	if ref.IsZero() {
		return ""
	}
	return `"` + ref.String() + `"`
}

// ScheduleChange is the last change the replica holds of the runtime
// schedules of schedule id's shard (schedules.shards): a put of id whose
// Schedule.Change is at most this is in the replica's scheduler and
// lookups.
func (r *Replica) ScheduleChange(id string) int64 { return r.follower.Version(id) }

// Schedules returns how many runtime schedules the replica holds.
func (r *Replica) Schedules() int { return r.follower.Len() }

// refuseSchedules takes the runtime schedules a replica's follower now
// refuses out of its scheduler, leaving their marks on the lock masters
// (they are not deleted: a replica that takes them claims their ticks
// against those marks, and a refusal that passes, a calendar or parent
// put again, finds them too); a delete of them forgets the marks.
func (r *Replica) refuseSchedules(names []string) {
	if r.sched != nil {
		r.sched.Remove(names...)
	}
}

// applySchedules puts the runtime schedules a replica's follower found
// changed into its scheduler, and removes the deleted ones, with their
// marks on the lock masters (which have no expiry: one a deleted schedule
// would stay for good) and the fencing counters of their dispatch and
// execution locks (which would stay a day). A definition the scheduler refuses is logged and
// left out; the others are put.
func (r *Replica) applySchedules(put []schedstore.Change, removed []string) {
	if r.sched == nil {
		return
	}
	if len(removed) > 0 {
		r.sched.Remove(removed...)
		if err := r.sched.ForgetMarks(context.Background(), removed...); err != nil {
			r.log.Warn("deleted runtime schedules: their marks stay on a lock master", slog.Int("schedules", len(removed)), slog.Any("err", err))
		}
		locks := make([]string, 0, 2*len(removed))
		for _, job := range removed {
			locks = append(locks, locknames.Exec(job), locknames.Fence(job))
		}
		if err := r.locks.Forget(context.Background(), locks...); err != nil {
			r.log.Warn("deleted runtime schedules: their lock fences stay on a lock master until they expire", slog.Int("schedules", len(removed)), slog.Any("err", err))
		}
	}
	if len(put) == 0 {
		return
	}
	sj := make([]scheduler.Job, len(put))
	for i, c := range put {
		sj[i] = schedulerJob(c.Job)
		sj[i].Since = c.Rec.Updated
		if l := r.cfg.MetricJob(c.Job.Name); l != c.Job.Name {
			sj[i].StatsGroup = l // counted together, as the metrics show them
		}
	}
	if err := r.sched.Put(sj...); err == nil {
		return
	}
	for i := range sj {
		if err := r.sched.Put(sj[i]); err != nil {
			r.log.Warn("runtime schedule refused by the scheduler: not run", slog.String("job", sj[i].Name), slog.Any("err", err))
		}
	}
}
