package baton

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// MaxSkip is the most ticks one Skip takes.
const MaxSkip = 100

// SkipRequest names ticks of a job that are not to run, who asks and why:
// the job's next Next ticks, or the Ticks given (each one of the job's
// schedule), not both.
type SkipRequest struct {
	By    string
	Note  string
	Next  int
	Ticks []time.Time
}

// SkipResult says which ticks Skip skipped and which it could not.
type SkipResult struct {
	Job string `json:"job"`
	// Skipped are the ticks a majority of lock masters recorded not to
	// run: no replica dispatches them, and the history records each
	// skipped, with who and why.
	Skipped []time.Time `json:"skipped"`
	// Refused are the ticks it could not skip, each with why (claimed
	// already, or too few masters took it).
	Refused []SkippedTick `json:"refused,omitempty"`
	// Failures names the masters that did not answer, and why.
	Failures []string `json:"failures,omitempty"`
}

var (
	//go:embed lua/skip.lua
	skipSrc    string
	skipScript = redis.NewScript(skipSrc)
	//go:embed lua/unskip.lua
	unskipSrc    string
	unskipScript = redis.NewScript(unskipSrc)
)

// Skip records ticks of job as not to run, before they are due: on every
// lock master, in parallel, each tick's record is set as a paused job's
// tick's is, unless a claim has taken the tick already. A tick that a
// majority of masters took is skipped: the claims of every replica find it
// decided and dispatch nothing (a backfill over it may still run it), and
// the history records it skipped, with who asked and why. A tick must be
// one of the job's schedule, due after the skew bound from now (a claim
// may take a tick that much early), at most MaxSkip at once. It fails for
// an unknown job, a singleton and a bad request (ErrBadPause); ticks that
// could not be skipped are in the result.
func (c *Cluster) Skip(ctx context.Context, job string, r SkipRequest) (SkipResult, error) {
	if err := c.pausable(job); err != nil {
		return SkipResult{}, err
	}
	if err := (PauseNote{By: r.By, Note: r.Note}).Check(); err != nil {
		return SkipResult{}, err
	}
	j, _ := c.cfg.Job(job)
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return SkipResult{}, fmt.Errorf("%w: queue Redis: %w", locking.ErrUnavailable, err)
	}
	ticks, err := skipTicks(j, r, now.Add(c.cfg.MaxClockSkew))
	if err != nil {
		return SkipResult{}, err
	}
	keys := make([]string, 0, 2*len(ticks))
	ttls := make([]any, len(ticks), len(ticks)+1)
	for i, t := range ticks {
		keys = append(keys, scheduler.TickKey(c.cfg.Namespace, job, t), skipKey(c.cfg.Namespace, job, t))
		// as a claim's record: the starting deadline and margins after
		// the tick, from now
		ttl := t.Sub(now) + j.StartingDeadline + c.cfg.Scheduler.TickLeaseTTL + 2*c.cfg.MaxClockSkew + c.cfg.Scheduler.RetentionMargin
		ttls[i] = ttl.Milliseconds()
	}
	reason := "skipped by " + r.By
	if r.Note != "" {
		reason += ": " + r.Note
	}
	keys = append(keys, skipsKey(c.cfg.Namespace, job))
	ttls = append(ttls, reason)
	for _, t := range ticks {
		ttls = append(ttls, t.UnixMilli())
	}
	took := make([][]int64, len(c.masters))
	res := c.eachMaster(ctx, job, true, func(ctx context.Context, m redis.UniversalClient, i int) (err error) {
		took[i], err = skipScript.Run(ctx, m, keys, ttls...).Int64Slice()
		return err
	})
	out := SkipResult{Job: job, Skipped: []time.Time{}, Failures: res.Failures}
	hist := runlog.NewWriter(c.cfg, c.queue, slog.New(slog.NewTextHandler(io.Discard, nil)))
	q := len(c.masters)/2 + 1
	for k, t := range ticks {
		yes, taken := 0, 0
		for i := range c.masters {
			switch {
			case len(took[i]) != len(ticks):
			case took[i][k] == 1:
				yes++
			default:
				taken++
			}
		}
		switch {
		case yes >= q:
			out.Skipped = append(out.Skipped, t)
			hist.NotRun(ctx, scheduler.Tick{Job: job, At: t}, string(jobs.StatusSkipped), reason)
		case taken > 0:
			out.Refused = append(out.Refused, SkippedTick{t, fmt.Sprintf("claimed already on %d of %d lock masters: it is being dispatched or was", taken, len(c.masters))})
		default:
			out.Refused = append(out.Refused, SkippedTick{t, fmt.Sprintf("recorded on %d of %d lock masters, %d needed: not skipped; skip it again", yes, len(c.masters), q)})
		}
	}
	return out, nil
}

// skipKey is the key beside a skipped tick's record on the lock masters
// that says it was skipped, and by whom (lua/skip.lua): a catch-up leaves
// such a tick out, whatever the history kept of it.
func skipKey(ns, job string, t time.Time) string { return scheduler.TickKey(ns, job, t) + ":skip" }

// skipsKey is the sorted set of a job's skipped ticks (unix ms) on each
// lock master.
func skipsKey(ns, job string) string { return ns + ":{" + job + "}:skips" }

// unskip takes back job's skips on every lock master (lua/unskip.lua):
// the ticks its set lists that still hold "paused", their skip keys, the
// set. Best effort, as the delete of a pause is.
func (c *Cluster) unskip(ctx context.Context, job string) {
	set := skipsKey(c.cfg.Namespace, job)
	c.eachMaster(ctx, job, false, func(ctx context.Context, m redis.UniversalClient, _ int) error {
		ms, err := m.ZRange(ctx, set, 0, -1).Result()
		if err != nil || len(ms) == 0 {
			return err
		}
		keys := make([]string, 0, 2*len(ms)+1)
		for _, s := range ms {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue // not baton's: the set goes below
			}
			t := time.UnixMilli(n)
			keys = append(keys, scheduler.TickKey(c.cfg.Namespace, job, t), skipKey(c.cfg.Namespace, job, t))
		}
		return unskipScript.Run(ctx, m, append(keys, set)).Err()
	})
}

// skippedOn returns, of ticks, those a lock master says were skipped
// (their skip key), with who skipped each and why; a master that does not
// answer is passed over (a tick skipped on a quorum has its key on a
// majority).
func (c *Cluster) skippedOn(ctx context.Context, job string, ticks []time.Time) map[int64]string {
	out := map[int64]string{}
	if len(ticks) == 0 {
		return out
	}
	keys := make([]string, len(ticks))
	for i, t := range ticks {
		keys[i] = skipKey(c.cfg.Namespace, job, t)
	}
	for _, m := range c.masters {
		mctx, cancel := context.WithTimeout(ctx, statusStep)
		vals, err := m.MGet(mctx, keys...).Result()
		cancel()
		if err != nil {
			continue
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				out[ticks[i].UnixMilli()] = s
			}
		}
	}
	return out
}

// skipTicks returns the ticks of j that r names: its next r.Next after
// from, or r.Ticks, each one of its schedule after from.
func skipTicks(j *config.Job, r SkipRequest, from time.Time) ([]time.Time, error) {
	switch {
	case r.Next != 0 && len(r.Ticks) > 0:
		return nil, fmt.Errorf("%w: name the next N ticks or the ticks, not both", ErrBadPause)
	case r.Next < 0 || r.Next > MaxSkip || len(r.Ticks) > MaxSkip:
		return nil, fmt.Errorf("%w: skip 1 to %d ticks at once", ErrBadPause, MaxSkip)
	case r.Next == 0 && len(r.Ticks) == 0:
		return nil, fmt.Errorf("%w: name the ticks to skip (the next N, or each)", ErrBadPause)
	}
	var ticks []time.Time
	if r.Next > 0 {
		for t := j.Sched.Next(from); !t.IsZero() && len(ticks) < r.Next; t = j.Sched.Next(t) {
			ticks = append(ticks, t.UTC())
		}
		if len(ticks) == 0 {
			return nil, fmt.Errorf("%w: job %q has no more ticks", ErrBadPause, j.Name)
		}
		return ticks, nil
	}
	for _, t := range r.Ticks {
		t = t.UTC()
		switch {
		case !j.Sched.Next(t.Add(-time.Nanosecond)).Equal(t):
			return nil, fmt.Errorf("%w: %s is not a tick of job %q (baton next lists them)", ErrBadPause, t.Format(time.RFC3339), j.Name)
		case !t.After(from):
			return nil, fmt.Errorf("%w: tick %s is due already, or within the clock skew bound: a replica may be dispatching it", ErrBadPause, t.Format(time.RFC3339))
		}
		ticks = append(ticks, t)
	}
	slices.SortFunc(ticks, time.Time.Compare)
	return slices.CompactFunc(ticks, time.Time.Equal), nil
}
