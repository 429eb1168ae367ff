package worker

import (
	"context"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// ledgerTimeout bounds a write of a tick's ledger record.
const ledgerTimeout = 2 * time.Second

// runHistory is what the worker writes to the run history (the queue
// Redis): the events of a run, typed by jobs.Status.
type runHistory struct{ w *runlog.Writer }

// hist is the run history the engine writes to.
func (e *engine) hist() runHistory { return runHistory{runlog.NewWriter(e.cfg, e.rdb, e.log)} }

// started records that run began (see runlog.Writer.Started).
func (h runHistory) started(ctx context.Context, t scheduler.Tick, run jobs.Run) {
	h.w.Started(ctx, t, run.Replica, run.Attempt, run.Fence)
}

// finished records how run ended with status st: an exec job's exit code
// when it ran its command to an end of its own, an http job's response
// status when it got one.
func (h runHistory) finished(ctx context.Context, t scheduler.Tick, run jobs.Run, st jobs.Status, job *config.Job, res jobs.Result, reason, output string) {
	end := runlog.End{Replica: run.Replica, Attempt: run.Attempt, Fence: run.Fence, Status: string(st), Reason: reason, Output: output}
	switch {
	case job.Exec != nil && res.ExitCode >= 0 && st != jobs.StatusSkipped && st != jobs.StatusReplaced && st != jobs.StatusDropped:
		end.ExitCode = &res.ExitCode
	case job.HTTP != nil && res.Status != 0:
		end.HTTPStatus = res.Status
	}
	h.w.Finished(ctx, t, job, end)
}

// refused records that the worker refused tick t's task, and why. It is a
// record of the tick, not of the run: a copy of a task that ran is
// refused beside the run's own record, which it leaves as it was.
func (h runHistory) refused(ctx context.Context, t scheduler.Tick, reason string) {
	h.w.NotRun(ctx, t, string(jobs.StatusRefused), reason)
}
