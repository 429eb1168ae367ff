// Package history reads the run history: internal/runlog writes the events
// of each run to a stream per job on the queue Redis (a compact list for a
// runtime schedule's), and Read folds them back into one jobs.RunRecord
// per run. baton.Cluster's History and Ticks read through it; the jobs
// package, which a handler imports, holds the records' types and links no
// Redis client.
package history

import (
	"context"
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
	"github.com/batonhq/baton/jobs"
)

// ReadError begins the error of a job's history that could not be read,
// before the job's quoted name: a caller that reads several tells whose.
const ReadError = "history: read the history of "

// Read returns up to n of job's newest runs and not-run ticks, newest
// tick first, from the queue Redis rdb. n <= 0 means all that are kept. An
// entry whose tick, attempt, fence, exit code or HTTP status does not parse
// is left out and reported: the records come with an error wrapping
// jobs.ErrCorrupt that names the stream's key and the entry (a tick that ran
// must never look as if it had not: backfills and catch-ups read this).
func Read(ctx context.Context, rdb redis.UniversalClient, ns, job string, n int) ([]jobs.RunRecord, error) {
	h, err := ReadJobs(ctx, rdb, ns, []string{job}, n)
	return h[job], err
}

// ReadJobs is Read of several jobs in one pipelined round trip,
// by job name.
func ReadJobs(ctx context.Context, rdb redis.UniversalClient, ns string, names []string, n int) (map[string][]jobs.RunRecord, error) {
	count := int64(0)
	if n > 0 {
		count = int64(n*runlog.EventsPerRun + 16) // retries add events; fold finds fewer runs than entries
	}
	return readJobs(ctx, rdb, ns, names, "-", count, n)
}

// ReadJobsSince is ReadJobs of the events written since since
// (by Redis's clock), all of them: the runs of the ticks due since then,
// without reading further back. A run of an earlier tick that ended
// since then comes with its later events only.
func ReadJobsSince(ctx context.Context, rdb redis.UniversalClient, ns string, names []string, since time.Time) (map[string][]jobs.RunRecord, error) {
	return readJobs(ctx, rdb, ns, names, strconv.FormatInt(max(since.UnixMilli(), 0), 10), 0, 0)
}

// readJobs reads the jobs' histories from the stream entry min on,
// newest first, at most count entries each (0: all), and keeps n records
// each (0: all).
func readJobs(ctx context.Context, rdb redis.UniversalClient, ns string, names []string, min string, count int64, n int) (map[string][]jobs.RunRecord, error) {
	pipe := rdb.Pipeline()
	cmds := make([]runlog.Events, len(names))
	minMS, _ := strconv.ParseInt(min, 10, 64)
	for i, job := range names {
		cmds[i] = runlog.QueueRead(ctx, pipe, ns, job, minMS, count)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	out := make(map[string][]jobs.RunRecord, len(names))
	var errs []error
	for i, job := range names {
		msgs, err := cmds[i].Result()
		if err != nil {
			errs = append(errs, fmt.Errorf(ReadError+"%q: %w", job, err))
			continue
		}
		slices.Reverse(msgs) // oldest first: later events overwrite earlier ones
		recs, err := fold(job, runlog.Key(ns, job), msgs)
		if err != nil {
			errs = append(errs, fmt.Errorf(ReadError+"%q: %w", job, err))
		}
		if n > 0 && len(recs) > n {
			recs = recs[:n]
		}
		out[job] = recs
	}
	return out, errors.Join(errs...)
}

// fold folds events (oldest first) of the stream key into records,
// newest tick first. A run is keyed by its run id; a not-run tick by its
// tick. Entries with a field that does not parse are left out, and the
// first of them returned as a *jobs.CorruptError (with the count of the others).
// Entries of a newer format than this release reads (a later release wrote
// them: their fields may mean something else) are left out too, and
// reported as a *formats.NewerError: a tick they say ran must not look as
// if it had not, to a backfill or catch-up that reads this.
func fold(job, key string, msgs []redis.XMessage) ([]jobs.RunRecord, error) {
	byKey := map[string]*jobs.RunRecord{}
	var order []string
	var corrupt *jobs.CorruptError
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
		if f, val, want := badField(v); f != "" {
			if bad == 0 {
				corrupt = &jobs.CorruptError{Key: key, Field: "entry " + m.ID + " field " + f, Value: redact.Cut(val), Want: want}
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
			r = &jobs.RunRecord{Job: job, Tick: tick, RunID: v("run")}
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
				r.Status = jobs.StatusDispatched
			}
		case runlog.EvNotRun:
			if r.Status == jobs.StatusSkipped && jobs.Status(v("status")) == jobs.StatusPaused {
				// a tick skipped on request (Cluster.Skip), then found so
				// by the claims, which record what they find: paused
				continue
			}
			r.Status, r.Reason, r.Ended = jobs.Status(v("status")), v("reason"), at
		case runlog.EvStarted:
			if a, _ := strconv.Atoi(v("attempt")); !r.Ended.IsZero() && a <= r.Attempt {
				// a start that landed after its attempt's end (a write
				// that timed out and was applied late): the end stands
				continue
			}
			r.Worker, r.Started, r.Status = v("replica"), startOf(at, v("took_ms")), jobs.StatusRunning
			if r.Dispatcher == "" {
				r.Dispatcher = v("by")
			}
			r.Ended, r.ExitCode, r.HTTPStatus, r.Reason, r.Output = time.Time{}, nil, 0, "", ""
			r.Attempt, _ = strconv.Atoi(v("attempt"))
			r.Fence, _ = strconv.ParseInt(v("fence"), 10, 64)
		case runlog.EvFinished:
			r.Worker, r.Ended, r.Status = v("replica"), at, jobs.Status(v("status"))
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
	out := make([]jobs.RunRecord, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	slices.SortStableFunc(out, func(a, b jobs.RunRecord) int {
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

// badField names the first field of a history entry (read by v) that
// does not parse, what it holds and what it must hold; "" when all do. The
// tick is required; the numbers only where present.
func badField(v func(string) string) (field, val, want string) {
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

// streamTime is the time of a stream entry ID ("<ms>-<seq>").
func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// Coverage returns the instant from which job's history tells, for
// each tick, whether it ran: every tick due from then on that ran has its
// events in the stream. Events are written at or after their tick's due
// instant and trimmed oldest-written first, so a tick due after the oldest
// entry still there was written (if it ran) after every trimmed entry. The
// stream's oldest entry's time (by Redis's clock) is that instant, and never
// earlier than history.max_age ago; with no history kept (or none written
// yet) it is now: the history tells nothing.
func Coverage(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, job string, now time.Time) (time.Time, error) {
	since, err := Coverages(ctx, rdb, cfg, []string{job}, now)
	if err != nil {
		return time.Time{}, err
	}
	return since[job], nil
}

// Coverages is Coverage of several jobs in one pipelined
// round trip, by job name.
func Coverages(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, names []string, now time.Time) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(names))
	if cfg.History.Runs <= 0 {
		for _, job := range names {
			out[job] = now
		}
		return out, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]runlog.Events, len(names))
	for i, job := range names {
		cmds[i] = runlog.QueueOldest(ctx, pipe, cfg.Namespace, job)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var errs []error
	for i, job := range names {
		first, err := cmds[i].Result()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf(ReadError+"%q: %w", job, err))
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
