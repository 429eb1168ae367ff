package jobs

// The run history, as a program reads it: internal/runlog writes the
// events of each run to a stream per job on the queue Redis; ReadHistory
// folds them back into one record per run.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/runlog"
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
	StatusStopped    Status = "stopped"    // stopped on request: its runtime schedule was deleted with its runs stopped
	StatusMissed     Status = "missed"     // not dispatched: past its starting deadline, left out by catch-up, or no quorum could vouch for it
	StatusPaused     Status = "paused"     // not dispatched: the job was paused
	StatusRefused    Status = "refused"    // not run: the worker refused its task (too old, its tick done, the job paused or past a limit)
	// StatusUnknown is a reader's verdict, never recorded: the run is
	// recorded running, but its worker is gone (not live in the roster, or
	// started again since) or its job's timeout has passed, so no end will
	// be recorded by it (baton's Cluster.History; Reason says why).
	StatusUnknown Status = "unknown"
)

// RunRecord is one run of a job, or one tick that did not run, as the
// history has it. Times are Redis's. Fields the history did not see (a
// worker that died before it wrote the end) are zero.
type RunRecord struct {
	Job    string    `json:"job"`
	Tick   time.Time `json:"tick"`
	RunID  string    `json:"run_id,omitempty"`
	Manual bool      `json:"manual,omitempty"`
	// Backfill: dispatched by a backfill or a resume's catch-up, not by
	// the live schedule.
	Backfill   bool      `json:"backfill,omitempty"`
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
	// Kept: a success kept beyond the history's count because none of the
	// newer runs kept succeeded (a runtime schedule's list): the last
	// success, older than the runs the history keeps otherwise.
	Kept bool `json:"kept,omitempty"`
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
		count = int64(n*runlog.EventsPerRun + 16) // retries add events; fold finds fewer runs than entries
	}
	return readHistories(ctx, rdb, ns, jobs, "-", count, n)
}

// ReadHistoriesSince is ReadHistories of the events written since since
// (by Redis's clock), all of them: the runs of the ticks due since then,
// without reading further back. A run of an earlier tick that ended
// since then comes with its later events only.
func ReadHistoriesSince(ctx context.Context, rdb redis.UniversalClient, ns string, jobs []string, since time.Time) (map[string][]RunRecord, error) {
	return readHistories(ctx, rdb, ns, jobs, strconv.FormatInt(max(since.UnixMilli(), 0), 10), 0, 0)
}

// readHistories reads the jobs' histories from the stream entry min on,
// newest first, at most count entries each (0: all), and keeps n records
// each (0: all).
func readHistories(ctx context.Context, rdb redis.UniversalClient, ns string, jobs []string, min string, count int64, n int) (map[string][]RunRecord, error) {
	pipe := rdb.Pipeline()
	cmds := make([]runlog.Events, len(jobs))
	minMS, _ := strconv.ParseInt(min, 10, 64)
	for i, job := range jobs {
		cmds[i] = runlog.QueueRead(ctx, pipe, ns, job, minMS, count)
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
		recs, err := foldHistory(job, runlog.Key(ns, job), msgs)
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
// Entries of a newer format than this release reads (a later release wrote
// them: their fields may mean something else) are left out too, and
// reported as a *formats.NewerError: a tick they say ran must not look as
// if it had not, to a backfill or catch-up that reads this.
func foldHistory(job, key string, msgs []redis.XMessage) ([]RunRecord, error) {
	byKey := map[string]*RunRecord{}
	var order []string
	var corrupt *CorruptError
	bad := 0
	var newer error
	for _, m := range msgs {
		v := func(k string) string { s, _ := m.Values[k].(string); return s }
		if ver, err := strconv.Atoi(v("v")); err == nil && ver > formats.HistoryEvent {
			if newer == nil {
				newer = formats.Check("history event", formats.HistoryEvent, ver)
			}
			continue
		}
		if f, val, want := badHistoryField(v); f != "" {
			if bad == 0 {
				corrupt = &CorruptError{Key: key, Field: "entry " + m.ID + " field " + f, Value: redact.Cut(val), Want: want}
			}
			bad++
			continue
		}
		tick, _ := time.Parse(time.RFC3339Nano, v("tick"))
		at := streamTime(m.ID)
		key := "run " + v("run")
		if v("ev") == runlog.EvNotRun || v("run") == "" {
			key = "tick " + v("tick")
		}
		r, ok := byKey[key]
		if !ok {
			r = &RunRecord{Job: job, Tick: tick, RunID: v("run")}
			byKey[key] = r
			order = append(order, key)
		}
		r.Manual = r.Manual || v("manual") == "1"
		r.Backfill = r.Backfill || v("backfill") == "1"
		r.Kept = r.Kept || v("kept") == "1"
		switch v("ev") {
		case runlog.EvDispatched:
			r.Dispatcher, r.Enqueued = v("replica"), at
			if r.Status == "" {
				r.Status = StatusDispatched
			}
		case runlog.EvNotRun:
			r.Status, r.Reason, r.Ended = Status(v("status")), v("reason"), at
		case runlog.EvStarted:
			if a, _ := strconv.Atoi(v("attempt")); !r.Ended.IsZero() && a <= r.Attempt {
				// a start that landed after its attempt's end (a write
				// that timed out and was applied late): the end stands
				continue
			}
			r.Worker, r.Started, r.Status = v("replica"), startOf(at, v("took_ms")), StatusRunning
			if r.Dispatcher == "" {
				r.Dispatcher = v("by")
			}
			r.Ended, r.ExitCode, r.HTTPStatus, r.Reason, r.Output = time.Time{}, nil, 0, "", ""
			r.Attempt, _ = strconv.Atoi(v("attempt"))
			r.Fence, _ = strconv.ParseInt(v("fence"), 10, 64)
		case runlog.EvFinished:
			r.Worker, r.Ended, r.Status = v("replica"), at, Status(v("status"))
			if v("took_ms") != "" {
				// an attempt whose start was not recorded on its own
				r.Started = startOf(at, v("took_ms"))
			}
			if r.Dispatcher == "" {
				r.Dispatcher = v("by")
			}
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
	var err error
	switch {
	case bad == 1:
		err = corrupt
	case bad > 1:
		err = fmt.Errorf("%w (and %d more entries)", corrupt, bad-1)
	}
	if newer != nil {
		err = errors.Join(err, fmt.Errorf("%s: entries left out: %w", key, newer))
	}
	return out, err
}

// startOf is the start of an attempt whose entry at time at says it was
// written tookMS after the attempt began ("" or unreadable: at).
func startOf(at time.Time, tookMS string) time.Time {
	ms, err := strconv.ParseInt(tookMS, 10, 64)
	if err != nil || ms <= 0 {
		return at
	}
	return at.Add(-time.Duration(ms) * time.Millisecond)
}

// badHistoryField names the first field of a history entry (read by v) that
// does not parse, what it holds and what it must hold; "" when all do. The
// tick is required; the numbers only where present.
func badHistoryField(v func(string) string) (field, val, want string) {
	if _, err := time.Parse(time.RFC3339Nano, v("tick")); err != nil {
		return "tick", v("tick"), "an RFC 3339 time"
	}
	for _, f := range []string{"attempt", "fence", "exit_code", "http_status", "took_ms"} {
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
	since, err := HistoryCoverages(ctx, rdb, cfg, []string{job}, now)
	if err != nil {
		return time.Time{}, err
	}
	return since[job], nil
}

// HistoryCoverages is HistoryCoverage of several jobs in one pipelined
// round trip, by job name.
func HistoryCoverages(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, jobs []string, now time.Time) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(jobs))
	if cfg.History.Runs <= 0 {
		for _, job := range jobs {
			out[job] = now
		}
		return out, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]runlog.Events, len(jobs))
	for i, job := range jobs {
		cmds[i] = runlog.QueueOldest(ctx, pipe, cfg.Namespace, job)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var errs []error
	for i, job := range jobs {
		first, err := cmds[i].Result()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("jobs: read the history of %q: %w", job, err))
			continue
		case len(first) == 0:
			out[job] = now
			continue
		}
		since := streamTime(first[0].ID)
		if oldest := now.Add(-cfg.History.MaxAge); since.Before(oldest) {
			since = oldest
		}
		out[job] = since
	}
	return out, errors.Join(errs...)
}
