package jobs

// The run history: one Redis stream per job on the queue Redis,
// NS:{history:JOB}, to which the workers append events as a run goes along
// (started, with the replica that dispatched it; finished), the scheduler
// the ticks that did not run (missed, paused), and a trigger its manual
// dispatch. A scheduled tick's dispatch writes nothing here: that would
// cost a command per tick on the dispatch path, and the tick's record on
// the lock masters already says it was dispatched. Appending needs no read: one
// script call per event, which also trims the stream to about
// history.runs x eventsPerRun entries and to history.max_age by Redis's
// clock. ReadHistory folds the events back into one record per run.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/scheduler"
)

// Status is how a run or a tick ended, as the history records it.
type Status string

// The statuses of RunRecord.Status.
const (
	StatusDispatched Status = "dispatched" // a manual run handed to a queue, not started yet
	StatusRunning    Status = "running"    // started, not finished (or its worker died)
	StatusOK         Status = "ok"
	StatusFailed     Status = "failed"
	StatusSkipped    Status = "skipped"    // not run: the job was running (concurrency forbid), or a newer tick held it
	StatusReplaced   Status = "replaced"   // stopped, or not started, for a newer tick (concurrency replace)
	StatusDropped    Status = "dropped"    // not run: the job was running and its buffer was full (buffer_one, buffer_all)
	StatusTimedOut   Status = "timed out"  // stopped at the job's timeout
	StatusLeaseLost  Status = "lease lost" // stopped: its execution lease could not be kept
	StatusMissed     Status = "missed"     // not dispatched: past its starting deadline, left out by catch-up, or no quorum could vouch for it
	StatusPaused     Status = "paused"     // not dispatched: the job was paused
	StatusRefused    Status = "refused"    // not run: the worker refused its task (too old, its tick done, the job paused or past a limit)
)

// RunRecord is one run of a job, or one tick that did not run, as the
// history has it. Times are Redis's. Fields the history did not see (a
// worker that died before it wrote the end) are zero.
type RunRecord struct {
	Job        string    `json:"job"`
	Tick       time.Time `json:"tick"`
	RunID      string    `json:"run_id,omitempty"`
	Manual     bool      `json:"manual,omitempty"`
	Dispatcher string    `json:"dispatcher,omitempty"` // the replica that dispatched it
	Worker     string    `json:"worker,omitempty"`     // the replica that ran it (the last attempt's)
	Enqueued   time.Time `json:"enqueued,omitzero"`    // a manual run's dispatch
	Started    time.Time `json:"started,omitzero"`
	Ended      time.Time `json:"ended,omitzero"`
	Status     Status    `json:"status"`
	Attempt    int       `json:"attempt,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`   // exec jobs
	HTTPStatus int       `json:"http_status,omitempty"` // http jobs
	Fence      int64     `json:"fence,omitempty"`
	Reason     string    `json:"reason,omitempty"` // why it failed or did not run
	Output     string    `json:"output,omitempty"` // the tail of a failed run's output, secrets masked
}

// eventsPerRun is how many events a run usually writes (dispatched,
// started, finished): the stream keeps history.runs times as many entries.
const eventsPerRun = 3

// Event kinds (field "ev").
const (
	evDispatched = "dispatched"
	evStarted    = "started"
	evFinished   = "finished"
	evNotRun     = "not_run" // missed or paused: field "status" says which
)

var (
	//go:embed lua/history_add.lua
	historyAddSrc string
	historyAdd    = redis.NewScript(historyAddSrc)
)

// historyKey is the stream that holds job's history in namespace ns.
func historyKey(ns, job string) string { return ns + ":{history:" + job + "}" }

// history appends events to the history of a config's jobs.
type history struct {
	cfg *config.Config
	rdb redis.UniversalClient
	log *slog.Logger
}

// enabled reports whether events are written.
func (h *history) enabled() bool { return h != nil && h.rdb != nil && h.cfg.History.Runs > 0 }

// Bounds of a history write: before a run starts it may delay the start
// (a local run works without the queue Redis), so it gives up sooner.
const (
	historyTimeout      = 2 * time.Second
	historyStartTimeout = 250 * time.Millisecond
)

// add appends one event (field, value pairs) to job's history, waiting at
// most timeout. A failure is logged, never returned: history is a record,
// not a precondition of a run.
func (h *history) add(ctx context.Context, timeout time.Duration, job string, fields ...any) {
	h.addOnce(ctx, timeout, job, "", fields...)
}

// addOnce is add, appending only if no event was with the same once key
// (within the max age); an empty once appends as add does.
func (h *history) addOnce(ctx context.Context, timeout time.Duration, job, once string, fields ...any) {
	if !h.enabled() {
		return
	}
	args := append([]any{h.cfg.History.Runs * eventsPerRun, h.cfg.History.MaxAge.Milliseconds()}, fields...)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	keys := []string{historyKey(h.cfg.Namespace, job)}
	if once != "" {
		keys = append(keys, once)
	}
	if err := historyAdd.Run(ctx, h.rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		h.log.Warn("cannot write the run history", slog.String("job", job), slog.Any("error", err))
	}
}

// tickFields are the fields every event of tick t carries, the first its
// format version.
func tickFields(ev string, t scheduler.Tick) []any {
	f := []any{"v", formats.HistoryEvent, "ev", ev, "tick", t.At.UTC().Format(time.RFC3339Nano), "run", t.RunID}
	if t.Manual {
		f = append(f, "manual", "1")
	}
	return f
}

// dispatched records that tick t was handed off by replica.
func (h *history) dispatched(ctx context.Context, t scheduler.Tick) {
	h.add(ctx, historyTimeout, t.Job, append(tickFields(evDispatched, t), "replica", t.Replica)...)
}

// notRun records that tick t was not dispatched (StatusMissed or
// StatusPaused), and why.
func (h *history) notRun(ctx context.Context, t scheduler.Tick, st Status, reason string) {
	t.RunID = "" // none ran: the record is the tick's
	h.add(ctx, historyTimeout, t.Job, append(tickFields(evNotRun, t), "status", string(st), "reason", reason)...)
}

// decided records that the scheduler decided tick t not to run
// (StatusMissed or StatusPaused), and why: once per tick and status,
// whichever replicas' claims found it so (see scheduler.Recorder). A
// backfill's decision is its own record.
func (h *history) decided(ctx context.Context, t scheduler.Tick, st Status, reason string) {
	if t.Backfill {
		h.notRun(ctx, t, st, reason)
		return
	}
	t.RunID = ""
	once := historyKey(h.cfg.Namespace, t.Job) + ":" + string(st) + ":" + strconv.FormatInt(t.At.UnixMilli(), 10)
	h.addOnce(ctx, historyTimeout, t.Job, once, append(tickFields(evNotRun, t), "status", string(st), "reason", reason)...)
}

// refused records that the worker refused tick t's task, and why. It is a
// record of the tick, not of the run: a copy of a task that ran is
// refused beside the run's own record, which it leaves as it was.
func (h *history) refused(ctx context.Context, t scheduler.Tick, reason string) {
	h.notRun(ctx, t, StatusRefused, reason)
}

// started records that run began on replica with fence, and which replica
// dispatched its tick.
func (h *history) started(ctx context.Context, t scheduler.Tick, run Run) {
	h.add(ctx, historyStartTimeout, t.Job, append(tickFields(evStarted, t), "replica", run.Replica,
		"attempt", run.Attempt, "fence", run.Fence, "by", t.Replica)...)
}

// finished records how run ended. code is the exit code of an exec job or
// the status of an http job's response (0: none).
func (h *history) finished(ctx context.Context, t scheduler.Tick, run Run, st Status, job *config.Job, res Result, reason, output string) {
	f := append(tickFields(evFinished, t), "replica", run.Replica, "attempt", run.Attempt, "status", string(st))
	if run.Fence != 0 {
		f = append(f, "fence", run.Fence)
	}
	switch {
	case job.Exec != nil && res.ExitCode >= 0 && st != StatusSkipped && st != StatusReplaced && st != StatusDropped:
		f = append(f, "exit_code", res.ExitCode)
	case job.HTTP != nil && res.Status != 0:
		f = append(f, "http_status", res.Status)
	}
	if reason = cleanReason(t, reason); reason != "" {
		f = append(f, "reason", job.MaskSecrets(reason))
	}
	if output != "" {
		f = append(f, "output", output)
	}
	h.add(ctx, historyTimeout, t.Job, f...)
}

// packagePrefix is this package's prefix at the start of an error's text or
// of a part of it.
var packagePrefix = regexp.MustCompile(`(^|: )jobs: `)

// cleanReason is an error's text as tick t's history record says why it
// failed: the record names the job and the tick, so each line of the text
// loses them and the package prefixes that wrapping repeated
// (`jobs: report@T: jobs: job "report": exec "x": ...` is `exec "x": ...`).
func cleanReason(t scheduler.Tick, reason string) string {
	lines := strings.Split(reason, "\n")
	for i, l := range lines {
		l = packagePrefix.ReplaceAllString(l, "$1")
		l = strings.TrimPrefix(l, t.ID()+": ")
		lines[i] = strings.ReplaceAll(l, "job "+strconv.Quote(t.Job)+": ", "")
	}
	return strings.Join(lines, "\n")
}

// ReadHistory returns up to n of job's newest runs and not-run ticks, newest
// tick first, from the queue Redis rdb. n <= 0 means all that are kept. An
// entry whose tick, attempt, fence, exit code or HTTP status does not parse
// is left out and reported: the records come with an error wrapping
// ErrCorrupt that names the stream's key and the entry (a tick that ran
// must never look as if it had not: backfills and catch-ups read this).
func ReadHistory(ctx context.Context, rdb redis.UniversalClient, ns, job string, n int) ([]RunRecord, error) {
	h, err := ReadHistories(ctx, rdb, ns, []string{job}, n)
	return h[job], err
}

// ReadHistories is ReadHistory of several jobs in one pipelined round trip,
// by job name.
func ReadHistories(ctx context.Context, rdb redis.UniversalClient, ns string, jobs []string, n int) (map[string][]RunRecord, error) {
	count := int64(0)
	if n > 0 {
		count = int64(n*eventsPerRun + 16) // retries add events; fold finds fewer runs than entries
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(jobs))
	for i, job := range jobs {
		if count > 0 {
			cmds[i] = pipe.XRevRangeN(ctx, historyKey(ns, job), "+", "-", count)
		} else {
			cmds[i] = pipe.XRevRange(ctx, historyKey(ns, job), "+", "-")
		}
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	out := make(map[string][]RunRecord, len(jobs))
	var errs []error
	for i, job := range jobs {
		msgs, err := cmds[i].Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("jobs: read the history of %q: %w", job, err))
			continue
		}
		slices.Reverse(msgs) // oldest first: later events overwrite earlier ones
		recs, err := foldHistory(job, historyKey(ns, job), msgs)
		if err != nil {
			errs = append(errs, fmt.Errorf("jobs: read the history of %q: %w", job, err))
		}
		if n > 0 && len(recs) > n {
			recs = recs[:n]
		}
		out[job] = recs
	}
	return out, errors.Join(errs...)
}

// foldHistory folds events (oldest first) of the stream key into records,
// newest tick first. A run is keyed by its run id; a not-run tick by its
// tick. Entries with a field that does not parse are left out, and the
// first of them returned as a *CorruptError (with the count of the others).
func foldHistory(job, key string, msgs []redis.XMessage) ([]RunRecord, error) {
	byKey := map[string]*RunRecord{}
	var order []string
	var corrupt *CorruptError
	bad := 0
	for _, m := range msgs {
		v := func(k string) string { s, _ := m.Values[k].(string); return s }
		if f, val, want := badHistoryField(v); f != "" {
			if bad == 0 {
				corrupt = &CorruptError{Key: key, Field: "entry " + m.ID + " field " + f, Value: cut(val), Want: want}
			}
			bad++
			continue
		}
		tick, _ := time.Parse(time.RFC3339Nano, v("tick"))
		at := streamTime(m.ID)
		key := "run " + v("run")
		if v("ev") == evNotRun || v("run") == "" {
			key = "tick " + v("tick")
		}
		r, ok := byKey[key]
		if !ok {
			r = &RunRecord{Job: job, Tick: tick, RunID: v("run")}
			byKey[key] = r
			order = append(order, key)
		}
		r.Manual = r.Manual || v("manual") == "1"
		switch v("ev") {
		case evDispatched:
			r.Dispatcher, r.Enqueued = v("replica"), at
			if r.Status == "" {
				r.Status = StatusDispatched
			}
		case evNotRun:
			r.Status, r.Reason, r.Ended = Status(v("status")), v("reason"), at
		case evStarted:
			r.Worker, r.Started, r.Status = v("replica"), at, StatusRunning
			if r.Dispatcher == "" {
				r.Dispatcher = v("by")
			}
			r.Ended, r.ExitCode, r.HTTPStatus, r.Reason, r.Output = time.Time{}, nil, 0, "", ""
			r.Attempt, _ = strconv.Atoi(v("attempt"))
			r.Fence, _ = strconv.ParseInt(v("fence"), 10, 64)
		case evFinished:
			r.Worker, r.Ended, r.Status = v("replica"), at, Status(v("status"))
			r.Attempt, _ = strconv.Atoi(v("attempt"))
			if f, err := strconv.ParseInt(v("fence"), 10, 64); err == nil {
				r.Fence = f
			}
			if c, err := strconv.Atoi(v("exit_code")); err == nil {
				r.ExitCode = &c
			}
			r.HTTPStatus, _ = strconv.Atoi(v("http_status"))
			r.Reason, r.Output = v("reason"), v("output")
		}
	}
	out := make([]RunRecord, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	slices.SortStableFunc(out, func(a, b RunRecord) int {
		if c := b.Tick.Compare(a.Tick); c != 0 {
			return c
		}
		return strings.Compare(b.RunID, a.RunID)
	})
	switch {
	case bad == 1:
		return out, corrupt
	case bad > 1:
		return out, fmt.Errorf("%w (and %d more entries)", corrupt, bad-1)
	}
	return out, nil
}

// badHistoryField names the first field of a history entry (read by v) that
// does not parse, what it holds and what it must hold; "" when all do. The
// tick is required; the numbers only where present.
func badHistoryField(v func(string) string) (field, val, want string) {
	if _, err := time.Parse(time.RFC3339Nano, v("tick")); err != nil {
		return "tick", v("tick"), "an RFC 3339 time"
	}
	for _, f := range []string{"attempt", "fence", "exit_code", "http_status"} {
		s := v(f)
		if s == "" {
			continue
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return f, s, "an integer"
		}
	}
	return "", "", ""
}

// Failed reports whether s is how a run that failed ended: failed, timed
// out or lease lost.
func (s Status) Failed() bool {
	return s == StatusFailed || s == StatusTimedOut || s == StatusLeaseLost
}

// FailureStreak returns how many of recs' runs (newest tick first, as
// ReadHistory returns them) failed since the newest one that succeeded, and
// that one (nil when recs hold none: the streak may go further back than
// recs). Ticks that did not run and runs under way, skipped, replaced or
// dropped count neither way.
func FailureStreak(recs []RunRecord) (failures int, lastOK *RunRecord) {
	for i := range recs {
		switch {
		case recs[i].Status == StatusOK:
			return failures, &recs[i]
		case recs[i].Status.Failed():
			failures++
		}
	}
	return failures, nil
}

// streamTime is the time of a stream entry ID ("<ms>-<seq>").
func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// HistoryCoverage returns the instant from which job's history tells, for
// each tick, whether it ran: every tick due from then on that ran has its
// events in the stream. Events are written at or after their tick's due
// instant and trimmed oldest-written first, so a tick due after the oldest
// entry still there was written (if it ran) after every trimmed entry. The
// stream's oldest entry's time (by Redis's clock) is that instant, and never
// earlier than history.max_age ago; with no history kept (or none written
// yet) it is now: the history tells nothing.
func HistoryCoverage(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, job string, now time.Time) (time.Time, error) {
	if cfg.History.Runs <= 0 {
		return now, nil
	}
	first, err := rdb.XRangeN(ctx, historyKey(cfg.Namespace, job), "-", "+", 1).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("jobs: read the history of %q: %w", job, err)
	}
	if len(first) == 0 {
		return now, nil
	}
	since := streamTime(first[0].ID)
	if oldest := now.Add(-cfg.History.MaxAge); since.Before(oldest) {
		since = oldest
	}
	return since, nil
}
