package schedule

import "time"

// Tick is one scheduled (or manually triggered) run of a job. Its identity is
// the job's name and the UTC instant it was due; every replica computes the
// same ticks, so the identity never depends on who noticed it.
type Tick struct {
	Job     string    // the job's name
	At      time.Time // the instant the tick was due, UTC: whole seconds (a manual tick: milliseconds)
	RunID   string    // random id of this dispatch (a manual trigger gets its own)
	Fence   int64     // dispatch fencing token: increases across the job's dispatches
	Replica string    // the replica that dispatched it
	Manual  bool      // dispatched by a trigger, not by the schedule
	// Backfill: dispatched by Backfill (an operator's backfill, or the
	// replay of a resume), not by the live schedule: like a trigger it is
	// explicit, and runs whatever the pause flag and the job's limits say.
	Backfill bool
}

// ID is the tick's identity, "job@2006-01-02T15:04:05Z". It is the asynq task
// ID of the run, so a tick can be enqueued only once. A manual run's ID
// also names its run id ("job@2006-01-02T15:04:05Z~RUNID"): it is never a
// scheduled tick's, and each trigger is its own run.
func (t Tick) ID() string {
	id := t.Job + "@" + t.At.UTC().Format(time.RFC3339)
	if t.Manual {
		id += "~" + t.RunID
	}
	return id
}
