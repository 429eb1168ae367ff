package handoff

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// max_runs: a job that runs at most max_runs scheduled ticks has each tick
// counted on the queue Redis before it is handed off (manual runs are not),
// and a tick whose hand-off fails with its task nowhere is counted back. A
// limit is decided per deployment, not per job list (doneHere).

var (
	//go:embed lua/max_runs.lua
	maxRunsSrc string
	maxRuns    = redis.NewScript(maxRunsSrc)
	//go:embed lua/max_runs_undo.lua
	maxRunsUndoSrc string
	maxRunsUndo    = redis.NewScript(maxRunsUndoSrc)
)

// dispatchCounted is Dispatch of a scheduled tick of a job with max_runs:
// it counts the tick, hands it off, and counts it back when the hand-off
// failed with its task nowhere. Once max_runs ticks were counted it
// returns scheduler.ErrJobDone (or leaves the tick to a live job list that
// still takes it).
func (d *Sender) dispatchCounted(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	added, count, err := d.countRun(ctx, job, t)
	if errors.Is(err, scheduler.ErrJobDone) {
		return d.doneHere(ctx, job, count, err)
	}
	if err != nil {
		return err
	}
	err = d.dispatch(ctx, job, t)
	if err != nil && added && !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		d.uncount(context.WithoutCancel(ctx), job, t)
	}
	return err
}

// countRun counts tick t of job, which has max_runs, on the queue Redis.
// added says this call counted it (a tick counted before is dispatched
// again without counting: an owner that took over); count is the job's
// count. It returns an error wrapping scheduler.ErrJobDone when the job had
// its max_runs ticks.
func (d *Sender) countRun(ctx context.Context, job *config.Job, t scheduler.Tick) (added bool, count int64, err error) {
	if d.rdb == nil {
		return false, 0, fmt.Errorf("handoff: dispatch %s: max_runs needs the queue Redis to count runs (WithQueueRedis)", t.ID())
	}
	keys := JobRunCountKeys(d.cfg.Namespace, job)
	res, err := maxRuns.Run(ctx, d.rdb, keys,
		t.ID(), t.At.UnixMilli(), job.MaxRuns, d.cfg.Retention(job).Milliseconds()).Slice()
	if err == nil && len(res) < 2 {
		err = fmt.Errorf("malformed reply %v", res)
	}
	if err != nil {
		return false, 0, fmt.Errorf("handoff: dispatch %s: count toward max_runs: %w", t.ID(), err)
	}
	if v, ok := res[1].(string); ok {
		return false, 0, fmt.Errorf("handoff: dispatch %s: %w", t.ID(), CorruptCount(keys[0], v))
	}
	count, _ = res[1].(int64)
	if st, _ := res[0].(int64); st == 0 {
		return false, count, fmt.Errorf("handoff: dispatch %s: the job ran its max_runs (%d) ticks: %w", t.ID(), job.MaxRuns, scheduler.ErrJobDone)
	}
	if len(res) < 3 {
		return false, count, nil
	}
	n, _ := res[2].(int64)
	return n == 1, count, nil
}

// CorruptCount is the error for a run count key that holds v, no count.
func CorruptCount(key, v string) error {
	return &jobs.CorruptError{Key: key, Value: redact.Cut(v), Want: "an integer from 0 to 2^53-2 (the job's run count toward max_runs)"}
}

// uncount takes back the count of tick t of job (max_runs) when no queue of
// this namespace holds its task: a failed enqueue whose reply was lost may
// have landed, and a tick counted back while its task exists would let one
// more tick run than max_runs. When that cannot be read the count stays
// (the job may stop one run short; it never runs one too many).
func (d *Sender) uncount(ctx context.Context, job *config.Job, t scheduler.Tick) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	held, err := d.taskEnqueued(ctx, t, job.Queue)
	switch {
	case err != nil:
		d.log.Warn("cannot tell whether a tick whose hand-off failed is in a queue: it stays counted toward max_runs (the job may stop one run short)",
			append(TickAttrs(t), slog.Any("error", err))...)
		return
	case held:
		return // enqueued after all: counted rightly
	}
	if err := maxRunsUndo.Run(ctx, d.rdb, JobRunCountKeys(d.cfg.Namespace, job), t.ID()).Err(); err != nil {
		d.log.Warn("cannot take back the count of a tick not dispatched: the job may stop one run short of max_runs",
			append(TickAttrs(t), slog.Any("error", err))...)
	}
}

// taskEnqueued tells whether some asynq queue of this namespace holds tick
// t's task (pending, running, retried, archived or completed and retained);
// own is the job's queue (config name), looked at even when asynq's list of
// queues (read at most queuesFresh ago) does not name it yet.
func (d *Sender) taskEnqueued(ctx context.Context, t scheduler.Tick, own string) (bool, error) {
	names, err := d.asynqQueues(ctx)
	if err != nil {
		return false, err
	}
	queues := []string{own}
	for _, name := range names {
		if q, ours := d.cfg.QueueOf(name); ours && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	q, err := d.queueHolding(ctx, queues, t)
	return q != "", err
}

// queueHolding returns the first of queues (config names) in which asynq
// holds tick t's task (in the job's lane), or "" if none does: one
// pipelined round trip.
func (d *Sender) queueHolding(ctx context.Context, queues []string, t scheduler.Tick) (string, error) {
	if len(queues) == 0 {
		return "", nil
	}
	pipe := d.rdb.Pipeline()
	found := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		found[i] = pipe.Exists(ctx, AsynqTaskKey(d.cfg.QueueFor(q, t.Job), t.ID()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("look for the tick's task: %w", err)
	}
	for i, c := range found {
		if c.Val() > 0 {
			return queues[i], nil
		}
	}
	return "", nil
}

// Precheck tells, before a local job's tick is recorded as dispatched,
// whether this list's max_runs leaves it to another list (see doneHere);
// it reads the count and counts nothing. It implements
// scheduler.Prechecker.
func (d *Sender) Precheck(ctx context.Context, t scheduler.Tick) error {
	job, ok := d.cfg.Job(t.Job)
	if !ok || job.MaxRuns == 0 || t.Manual || d.rdb == nil {
		return nil
	}
	v, err := d.rdb.Get(ctx, JobRunCountKeys(d.cfg.Namespace, job)[0]).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("handoff: dispatch %s: read the max_runs count: %w", t.ID(), err)
	}
	count, ok := quorum.ParseCounter(v)
	if !ok {
		return fmt.Errorf("handoff: dispatch %s: %w", t.ID(), CorruptCount(JobRunCountKeys(d.cfg.Namespace, job)[0], v))
	}
	if count < int64(job.MaxRuns) {
		return nil
	}
	return d.doneHere(ctx, job, count, fmt.Errorf("handoff: dispatch %s: the job ran its max_runs (%d) ticks: %w", t.ID(), job.MaxRuns, scheduler.ErrJobDone))
}

// doneHere decides a tick that this job list's max_runs refuses after count
// counted ticks. A limit is decided per deployment, not per list: while a
// live replica that claims ticks runs a list that would still take it (a
// rolling deploy raised or removed max_runs), the tick is left to it
// (scheduler.ErrLeftToOthers: released, not recorded); otherwise done is
// returned (it wraps scheduler.ErrJobDone). Replicas of versions that do
// not publish their limits count as not taking it (what they decide, they
// decide by their own list). A replica counts as live by the queue Redis's
// clock or when it beat within the liveness window of the newest heartbeat
// (a short step of that clock, not yet seen by a heartbeat, moves every
// entry's age alike). A roster that cannot be read, or that shows no
// live replica (this one's own heartbeat not among them: the queue Redis's
// clock stepped), leaves the tick undecided: an error, and the tick is
// tried again.
func (d *Sender) doneHere(ctx context.Context, job *config.Job, count int64, done error) error {
	members, err := roster.Read(ctx, d.rdb, d.cfg.Namespace)
	if err != nil {
		return fmt.Errorf("handoff: %s reached max_runs here; whether another job list takes its tick is unknown: %w", job.Name, err)
	}
	if roster.Stale(members) {
		return fmt.Errorf("handoff: %s reached max_runs here; the roster shows no live replica, this one included (the queue Redis's clock stepped forward?): whether another job list takes its tick is decided after a heartbeat", job.Name)
	}
	// live by the queue Redis's clock, or by the newest heartbeat: a step
	// forward of that clock shorter than the liveness window, before a
	// heartbeat has seen it, makes a member that beat a little before this
	// one look dead while this one looks live (not stale), but moves no
	// heartbeat against another
	var newest time.Time
	for _, m := range members {
		if m.Seen.After(newest) {
			newest = m.Seen
		}
	}
	for _, m := range members {
		if !m.Live && newest.Sub(m.Seen) > roster.LiveWindow || m.Role == "worker" || !m.LimitsKnown {
			continue
		}
		l, ok := m.Jobs[job.Name]
		if !ok || (l.Mode != config.ModeCron && l.Mode != config.ModeLocal) {
			continue
		}
		if limit := m.MaxRuns[job.Name]; limit == 0 || int64(limit) > count {
			what := "no max_runs"
			if limit > 0 {
				what = fmt.Sprintf("max_runs %d", limit)
			}
			return fmt.Errorf("handoff: %s ran %d ticks, its max_runs here (%d), but replica %s's job list has %s: %w",
				job.Name, count, job.MaxRuns, m.ID, what, scheduler.ErrLeftToOthers)
		}
	}
	return done
}
