// Package runlog writes the run history: one Redis stream per job on the
// queue Redis, NS:{history:JOB}, to which the workers append events as a
// run goes along (started, with the replica that dispatched it; finished),
// the scheduler the ticks that did not run (missed, paused), and a trigger
// its manual dispatch. A scheduled tick's dispatch writes nothing here: that
// would cost a command per tick on the dispatch path, and the tick's record
// on the lock masters already says it was dispatched. Appending needs no
// read: one script call per event, which also trims the stream to about
// history.runs x EventsPerRun entries and to history.max_age by Redis's
// clock. internal/history folds the events back into one record per run.
//
// Statuses are the strings of jobs.Status: this package is below jobs,
// which reads what it writes.
package runlog

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/schedule"
)

// EventsPerRun is how many events a run writes at most (dispatched, for a
// manual run; started, unless it ended within history.start_after;
// finished): the stream keeps history.runs times as many entries.
const EventsPerRun = 3

// Event kinds (field "ev").
const (
	EvDispatched = "dispatched"
	EvStarted    = "started"
	EvFinished   = "finished"
	EvNotRun     = "not_run" // missed, paused or refused: field "status" says which
)

var (
	//go:embed lua/history_add.lua
	historyAddSrc string
	historyAdd    = redis.NewScript(historyAddSrc)
	//go:embed lua/history_start.lua
	historyStartSrc string
	historyStart    = redis.NewScript(historyStartSrc)
	//go:embed lua/list_entry.lua
	listEntrySrc string
	//go:embed lua/history_add_list.lua
	historyAddListSrc string
	historyAddList    = redis.NewScript(listEntrySrc + historyAddListSrc)
	//go:embed lua/history_start_list.lua
	historyStartListSrc string
	historyStartList    = redis.NewScript(listEntrySrc + historyStartListSrc)
	//go:embed lua/failing.lua
	failingSrc    string
	failingScript = redis.NewScript(failingSrc)
)

// Writer appends events to the history of a config's jobs. A nil Writer,
// or one without a Redis, writes nothing.
type Writer struct {
	cfg *config.Config
	rdb redis.UniversalClient
	log *slog.Logger
	// startTimeout bounds a start's write (historyStartTimeout)
	startTimeout time.Duration
}

// NewWriter returns a writer of cfg's jobs' histories to the queue Redis
// rdb (nil: none), logging failed writes to log.
func NewWriter(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) *Writer {
	return &Writer{cfg: cfg, rdb: rdb, log: log, startTimeout: historyStartTimeout}
}

// enabled reports whether job's events are written.
func (h *Writer) enabled(job string) bool {
	return h != nil && h.rdb != nil && h.cfg.HistoryRuns(job) > 0
}

// Bounds of a history write: before a run starts it may delay the start
// (a local run works without the queue Redis), so it gives up sooner.
const (
	historyTimeout      = 2 * time.Second
	historyStartTimeout = 250 * time.Millisecond
)

// add appends one event (field, value pairs) to job's history, waiting at
// most timeout. A failure is logged, never returned: history is a record,
// not a precondition of a run.
func (h *Writer) add(ctx context.Context, timeout time.Duration, job string, fields ...any) bool {
	_, ok := h.write(ctx, timeout, job, "", false, nil, fields...)
	return ok
}

// addOnce is add, appending only if no event was with the same once key
// (within the max age); an empty once appends as add does. It tells
// whether the write was answered without an error.
func (h *Writer) addOnce(ctx context.Context, timeout time.Duration, job, once string, fields ...any) bool {
	_, ok := h.write(ctx, timeout, job, once, false, nil, fields...)
	return ok
}

// form is how a history is kept: a job's stream, a runtime schedule's
// list (where memory counts).
type form struct {
	key        func(ns, job string) string
	add, start *redis.Script // an event; a run's start (appended only: its end trims)
	perRun     int           // entries kept per run of history.runs
	fields     func([]any) []any
	plain      bool // a run's start and end are plain commands (trip.plainStart, plainEnd)
}

var (
	streamForm = form{key: Key, add: historyAdd, start: historyStart, perRun: EventsPerRun, fields: func(f []any) []any { return f }, plain: true}
	// one element a run: a run's end replaces its start (history_add_list.lua)
	listForm = form{key: ListKey, add: historyAddList, start: historyStartList, perRun: 1, fields: shortFields}
)

// formOf is the form of job's history.
func formOf(job string) form {
	if Compact(job) {
		return listForm
	}
	return streamForm
}

// write appends one event to job's history: a run's start (start: appended
// only, the run's end trims the history and renews its expiry) or any
// other event (see addOnce). also go to the queue Redis in the same round
// trip, whether the history is kept or not.
// It returns the entry's ID ("" for a list's element) and whether the
// event was written.
func (h *Writer) write(ctx context.Context, timeout time.Duration, job, once string, start bool, also []Also, fields ...any) (string, bool) {
	tr := h.trip(ctx, timeout)
	if tr == nil {
		return "", false
	}
	defer tr.cancel()
	ok := tr.event(job, once, start, "", fields...)
	tr.also(also)
	tr.send()
	return ok()
}

// Send sends also (nil ones are skipped) in one round trip, without a
// history event.
func (h *Writer) Send(ctx context.Context, also ...Also) {
	tr := h.trip(ctx, historyTimeout)
	if tr == nil {
		return
	}
	defer tr.cancel()
	tr.also(also)
	tr.send()
}

// Also is a write of the caller's to the queue Redis that goes in the same
// round trip (one pipeline) as a history event: it queues its commands on
// p and returns what reads their answers once they are sent (nil: none).
// A run's start, say, also records the job's holder, and its end the tick's
// ledger record: one round trip instead of two.
type Also func(ctx context.Context, p redis.Pipeliner) (check func())

// Both is a and b in one Also (either may be nil).
func Both(a, b Also) Also {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(ctx context.Context, p redis.Pipeliner) func() {
		ca, cb := a(ctx, p), b(ctx, p)
		return func() {
			if ca != nil {
				ca()
			}
			if cb != nil {
				cb()
			}
		}
	}
}

// trip is the writes of one round trip to the queue Redis.
type trip struct {
	h      *Writer
	ctx    context.Context
	cancel context.CancelFunc
	pipe   redis.Pipeliner
	evals  []*eval
	checks []func()
}

// eval is a script call queued on a trip, with what a failure logs.
type eval struct {
	s    *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
	fail string // the log line of a failure
	job  string
}

// trip starts a round trip bounded by timeout (also when ctx ends: a record
// outlives its run's context); nil when there is no Redis to write to.
func (h *Writer) trip(ctx context.Context, timeout time.Duration) *trip {
	if h == nil || h.rdb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	return &trip{h: h, ctx: ctx, cancel: cancel, pipe: h.rdb.Pipeline()}
}

// event queues one event of job's history (see write); the returned func
// tells, once the trip is sent, the entry's ID ("" for a list's element)
// and whether it was written. since is the ID of the run's start in a
// stream ("": none; see End.StartID).
func (tr *trip) event(job, once string, start bool, since string, fields ...any) func() (string, bool) {
	if !tr.h.enabled(job) {
		return func() (string, bool) { return "", false }
	}
	h := tr.h
	f := formOf(job)
	n, maxAge := h.cfg.HistoryRuns(job)*f.perRun, h.cfg.History.MaxAge.Milliseconds()
	key := f.key(h.cfg.Namespace, job)
	if f.plain && once == "" {
		if start {
			return tr.plainStart(key, n, maxAge, job, fields)
		}
		if ms, ok := idTime(since); ok {
			return tr.plainEnd(key, maxAge, ms, job, fields)
		}
	}
	args := append([]any{n, maxAge}, f.fields(fields)...)
	keys, script := []string{key}, f.add
	if start {
		script = f.start
	}
	if once != "" {
		keys = append(keys, once)
	}
	e := tr.eval(script, keys, args, "cannot write the run history", job)
	return func() (string, bool) {
		err := e.cmd.Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", false
		}
		id, _ := e.cmd.Val().(string)
		return id, true
	}
}

// plainStart queues a run's start in a stream as one XADD NOMKSTREAM: no
// script. Where the stream does not exist, the start is written again by
// history_start.lua, which makes it with its expiry.
func (tr *trip) plainStart(key string, n int, maxAge int64, job string, fields []any) func() (string, bool) {
	cmd := tr.pipe.XAdd(tr.ctx, &redis.XAddArgs{Stream: key, NoMkStream: true, MaxLen: int64(n), Approx: true, Values: fields})
	return func() (string, bool) {
		id, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			id, err = historyStart.Run(tr.ctx, tr.h.rdb, []string{key}, append([]any{n, maxAge}, fields...)...).Text()
		}
		if err != nil {
			tr.h.log.Warn("cannot write the run history", slog.String("job", job), slog.Any("error", err))
			return "", false
		}
		return id, true
	}
}

// plainEnd queues a run's end in a stream as plain commands, no script:
// XADD NOMKSTREAM, trimming by age (MINID ~) from the time of the run's
// start (its entry's ID, by the queue Redis's clock as history_add.lua's
// trim: at most the run's length staler), and PEXPIRE. Where the stream
// does not exist (it expired or was deleted during the run) the end is
// written by history_add.lua, which makes it with its expiry. The start's
// XADD trims by count.
func (tr *trip) plainEnd(key string, maxAge, since int64, job string, fields []any) func() (string, bool) {
	add := tr.pipe.XAdd(tr.ctx, &redis.XAddArgs{Stream: key, NoMkStream: true, MinID: strconv.FormatInt(since-maxAge, 10), Approx: true, Values: fields})
	tr.pipe.PExpire(tr.ctx, key, time.Duration(maxAge)*time.Millisecond)
	var id string
	var err error
	tr.checks = append(tr.checks, func() {
		id, err = add.Result()
		if errors.Is(err, redis.Nil) {
			// the script makes the stream with its expiry
			n := tr.h.cfg.HistoryRuns(job) * EventsPerRun
			id, err = historyAdd.Run(tr.ctx, tr.h.rdb, []string{key}, append([]any{n, maxAge}, fields...)...).Text()
		}
		if err != nil {
			tr.h.log.Warn("cannot write the run history", slog.String("job", job), slog.Any("error", err))
		}
	})
	return func() (string, bool) { return id, err == nil }
}

// idTime is the time (unix ms) of a stream entry's ID "<ms>-<seq>".
func idTime(id string) (int64, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil && n > 0
}

// eval queues a script call by its hash.
func (tr *trip) eval(s *redis.Script, keys []string, args []any, fail, job string) *eval {
	e := &eval{s: s, keys: keys, args: args, fail: fail, job: job, cmd: tr.pipe.EvalSha(tr.ctx, s.Hash(), keys, args...)}
	tr.evals = append(tr.evals, e)
	return e
}

// also queues the callers' writes.
func (tr *trip) also(also []Also) {
	for _, a := range also {
		if a == nil {
			continue
		}
		if c := a(tr.ctx, tr.pipe); c != nil {
			tr.checks = append(tr.checks, c)
		}
	}
}

// send sends the trip in one pipeline, sends again on its own each script
// the server did not hold (a restart, SCRIPT FLUSH: EVAL loads it), logs
// the scripts that failed and runs the callers' checks.
func (tr *trip) send() {
	if len(tr.evals) == 0 && len(tr.checks) == 0 && tr.pipe.Len() == 0 {
		return
	}
	_, _ = tr.pipe.Exec(tr.ctx) // every command holds its own answer
	for _, e := range tr.evals {
		if err := e.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			e.cmd = e.s.Run(tr.ctx, tr.h.rdb, e.keys, e.args...)
		}
		if err := e.cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			tr.h.log.Warn(e.fail, slog.String("job", e.job), slog.Any("error", err))
		}
	}
	for _, c := range tr.checks {
		c()
	}
}

// tickFields are the fields every event of tick t carries, the first its
// format version.
func tickFields(ev string, t schedule.Tick) []any {
	f := []any{"v", formats.HistoryEvent, "ev", ev, "tick", t.At.UTC().Format(time.RFC3339Nano), "run", t.RunID}
	if t.Manual {
		f = append(f, "manual", "1")
	}
	if t.Backfill {
		f = append(f, "backfill", "1")
	}
	return f
}

// Dispatched records that tick t was handed off by t.Replica.
func (h *Writer) Dispatched(ctx context.Context, t schedule.Tick) {
	h.add(ctx, historyTimeout, t.Job, append(tickFields(EvDispatched, t), "replica", t.Replica)...)
}

// NotRun records that tick t did not run (missed, paused or refused), and
// why.
func (h *Writer) NotRun(ctx context.Context, t schedule.Tick, status, reason string) {
	t.RunID = "" // none ran: the record is the tick's
	// jobs.StatusRefused
	if status != "refused" {
		h.add(ctx, historyTimeout, t.Job, append(tickFields(EvNotRun, t), "status", status, "reason", reason)...)
		return
	}
	// a refused tick of a runtime schedule counts it failing (a handler no
	// replica registers must not fail every tick silently)
	tr := h.trip(ctx, historyTimeout)
	if tr == nil {
		return
	}
	defer tr.cancel()
	tr.event(t.Job, "", false, "", append(tickFields(EvNotRun, t), "status", status, "reason", reason)...)
	tr.noteFailing(t, status)
	tr.send()
}

// Decided records that the scheduler decided tick t not to run (missed or
// paused), and why: once per tick and status, whichever replicas' claims
// found it so (see scheduler.Recorder). A backfill's decision is its own
// record.
func (h *Writer) Decided(ctx context.Context, t schedule.Tick, status, reason string) {
	if t.Backfill {
		h.NotRun(ctx, t, status, reason)
		return
	}
	t.RunID = ""
	once := onceKey(h.cfg.Namespace, t.Job, status, t.At.UnixMilli())
	h.addOnce(ctx, historyTimeout, t.Job, once, append(tickFields(EvNotRun, t), "status", status, "reason", reason)...)
}

// Started records that tick t's attempt began on replica with fence (0:
// none), and which replica dispatched the tick, in one round trip with also.
// It waits less than the other writes: it delays the run's start. It
// returns the entry's ID for the run's end (End.StartID), "" when none.
func (h *Writer) Started(ctx context.Context, t schedule.Tick, replica string, attempt int, fence int64, also ...Also) string {
	id, _ := h.StartedAgo(ctx, t, replica, attempt, fence, 0, also...)
	return id
}

// StartedAgo is Started written took after the attempt began (its
// history.start_after): the entry says so (took_ms), and the record's
// start is the entry's time less took. It tells whether the write was
// answered without an error.
func (h *Writer) StartedAgo(ctx context.Context, t schedule.Tick, replica string, attempt int, fence int64, took time.Duration, also ...Also) (id string, written bool) {
	f := append(tickFields(EvStarted, t), "replica", replica, "attempt", attempt, "fence", fence, "by", t.Replica)
	if took > 0 {
		f = append(f, "took_ms", took.Milliseconds())
	}
	return h.write(ctx, h.startTimeout, t.Job, "", true, also, f...)
}

// End is how one attempt of a run ended.
type End struct {
	Replica    string
	Attempt    int
	Fence      int64 // 0: none
	Status     string
	ExitCode   *int // an exec job's, nil when none is told
	HTTPStatus int  // an http job's response status, 0 when none
	Reason     string
	Output     string // the tail of a failed run's output, secrets masked
	// Took, when the run's start was not recorded (see Started), or
	// always for a runtime schedule (whose end replaces its start in the
	// list): how long it ran, and By, the replica that dispatched its tick.
	// A reader takes the start as the end's time less Took.
	Took time.Duration
	By   string
	// StartID is the ID of the run's "started" entry (Started), when it
	// wrote one to a stream: the end then trims the stream by age from its
	// time, with plain commands.
	StartID string
}

// Finished records how tick t's attempt ended, in one round trip with
// also and, for a runtime schedule, the index of failing schedules. The
// reason loses what the record says already (see CleanReason) and job's
// secrets.
func (h *Writer) Finished(ctx context.Context, t schedule.Tick, job *config.Job, e End, also ...Also) {
	f := append(tickFields(EvFinished, t), "replica", e.Replica, "attempt", e.Attempt, "status", e.Status)
	if e.Fence != 0 {
		f = append(f, "fence", e.Fence)
	}
	switch {
	case e.ExitCode != nil:
		f = append(f, "exit_code", *e.ExitCode)
	case e.HTTPStatus != 0:
		f = append(f, "http_status", e.HTTPStatus)
	}
	if reason := CleanReason(t, e.Reason); reason != "" {
		f = append(f, "reason", job.MaskSecrets(reason))
	}
	if e.Output != "" {
		f = append(f, "output", e.Output)
	}
	if e.Took > 0 {
		f = append(f, "took_ms", e.Took.Milliseconds(), "by", e.By)
	}
	tr := h.trip(ctx, historyTimeout)
	if tr == nil {
		return
	}
	defer tr.cancel()
	tr.event(t.Job, "", false, e.StartID, f...)
	tr.noteFailing(t, e.Status)
	tr.also(also)
	tr.send()
}

// noteFailing keeps the index of runtime schedules whose newest run
// failed (FailingKey), which the status counts without reading every
// schedule's history: a failed, timed-out or lost run, or a refused tick
// (NotRun), adds the schedule (since its first failure) while it exists,
// any other end removes it.
// Best effort, as the history.
func (tr *trip) noteFailing(t schedule.Tick, status string) {
	id, ok := config.ScheduleID(t.Job)
	if !ok {
		return
	}
	cfg := tr.h.cfg
	switch status {
	case "failed", "timed out", "lease lost", "refused": // jobs.Status.Failed, and a tick refused
		keys := []string{FailingKey(cfg, id), cfg.ScheduleKeysOf(id) + "defs"}
		tr.eval(failingScript, keys, []any{id}, "cannot write the index of failing runtime schedules", t.Job)
	default:
		// any other end removes it with one ZREM, no script
		rem := tr.pipe.ZRem(tr.ctx, FailingKey(cfg, id), id)
		tr.checks = append(tr.checks, func() {
			if err := rem.Err(); err != nil {
				tr.h.log.Warn("cannot write the index of failing runtime schedules", slog.String("job", t.Job), slog.Any("error", err))
			}
		})
	}
}

// packagePrefix is the prefix of a package of the run path (the worker,
// the executor) at the start of an error's text or of a part of it.
var packagePrefix = regexp.MustCompile(`(^|: )(worker|executor): `)

// CleanReason is an error's text as tick t's history record says why it
// failed: the record names the job and the tick, so each line of the text
// loses them and the package prefixes that wrapping repeated
// (`worker: report@T: executor: job "report": exec "x": ...` is
// `exec "x": ...`).
func CleanReason(t schedule.Tick, reason string) string {
	lines := strings.Split(reason, "\n")
	for i, l := range lines {
		l = packagePrefix.ReplaceAllString(l, "$1")
		l = strings.TrimPrefix(l, t.ID()+": ")
		lines[i] = strings.ReplaceAll(l, "job "+strconv.Quote(t.Job)+": ", "")
	}
	return strings.Join(lines, "\n")
}
