package jobs

// The run history's records: internal/runlog writes the events of each run
// to a stream per job on the queue Redis; internal/history folds them back
// into one RunRecord per run (baton.Cluster's History returns them).

import "time"

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

// Failed reports whether s is how a run that failed ended: failed, timed
// out or lease lost.
func (s Status) Failed() bool {
	return s == StatusFailed || s == StatusTimedOut || s == StatusLeaseLost
}

// FailureStreak returns how many of recs' runs (newest tick first, as
// the history returns them) failed since the newest one that succeeded, and
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
