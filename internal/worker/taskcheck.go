package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/scheduler"
)

// The checks a task passes before it is admitted (admit.go): its shape,
// its run id, and whether its tick is due by this worker's clock.

// ErrRefused wraps why a worker refused a task it will never run: a bad
// or missing signature, a task ID that is not its tick's, a malformed run
// id or retry count.
var ErrRefused = errors.New("jobs: task refused")

// refuse archives a task the worker will not run. It logs the first
// refusal of each kind and counts every one: what a forged task says (job,
// tick, namespace) is the forger's to choose, so neither the log nor the
// worker's memory may grow with it.
func (w *Worker) refuse(t scheduler.Tick, kind string, err error) error {
	w.count(t.Job, func(c *counters) { c.failed.Add(1) }) // per job only for jobs of the config
	w.refusals.add(RefusedBadTask)
	if _, logged := w.refused.LoadOrStore(kind, true); !logged {
		w.log.Error("refusing a task: "+kind+" (archived, not run; later refusals of this kind are counted, not logged)",
			append(handoff.TickAttrs(t), slog.Any("error", err))...)
	}
	return fmt.Errorf("%w: %s: %w: %w", ErrRefused, t.ID(), err, asynq.SkipRetry)
}

// runIDRE is the shape of a run id (the scheduler's are 32 hex digits):
// nothing that could not be a token.
var runIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// validTask checks what a signed payload says against the task that
// carried it: the task ID is the tick's (job@tick, so asynq's ID dedup
// covers the tick), and the run id has its shape.
func validTask(t scheduler.Tick, taskID string) error {
	if taskID != t.ID() {
		return fmt.Errorf("task ID %q is not its tick's %q", taskID, t.ID())
	}
	if !runIDRE.MatchString(t.RunID) {
		return fmt.Errorf("run id %q is not 1 to 64 of A-Z a-z 0-9 _ . -", t.RunID)
	}
	return nil
}

// errNotDue: a tick in the future by this worker's clock. A scheduler
// never dispatches a tick before it is due (by Redis's clock, within
// max_clock_skew), so either this worker's clock is behind or the task was
// signed for later; either way it waits, handed back without spending an
// attempt, rather than be lost.
var errNotDue = fmt.Errorf("tick not due yet by this worker's clock: %w", ErrRunsElsewhere)

// validTick checks what the worker can check of a tick without Redis: it is
// not in the future beyond the clock skew both replicas may have. (Whether
// the job's schedule has the tick is not checked: during a rolling deploy
// that changes the schedule, replicas with the old one dispatch ticks the
// new one does not have, and those must run.)
func (w *Worker) validTick(t scheduler.Tick) error {
	if ahead := time.Until(t.At); ahead > 2*w.cfg.MaxClockSkew+time.Second {
		if _, logged := w.refused.LoadOrStore(t.Job+"\x00not due", true); !logged {
			w.log.Warn("a task's tick is in the future by this worker's clock: it waits (is this host's clock behind?)",
				append(handoff.TickAttrs(t), slog.Duration("ahead", ahead))...)
		}
		return fmt.Errorf("jobs: %s: %s ahead: %w", t.ID(), ahead.Round(time.Millisecond), errNotDue)
	}
	return nil
}
