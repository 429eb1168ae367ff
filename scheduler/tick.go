package scheduler

import (
	"context"
	"errors"

	"github.com/batonhq/baton/schedule"
)

// ErrAlreadyDispatched is what a Dispatcher may return for a tick an earlier
// dispatch already handed on (asynq's task ID conflict): the tick counts as
// dispatched, and logs can tell it from a first dispatch.
var ErrAlreadyDispatched = errors.New("scheduler: tick already dispatched")

// ErrJobDone is what a Dispatcher returns for a tick of a job that takes no
// more ticks (it reached its max_runs): the tick is recorded as decided, not
// run and not counted as dispatched, and this scheduler stops claiming the
// job's ticks until it is made anew (a restart, a reload).
var ErrJobDone = errors.New("scheduler: the job takes no more ticks")

// ErrLeftToOthers is what a Dispatcher returns for a tick it will not take
// while another live replica would (its job list differs: a rolling deploy
// that raised or removed max_runs). The tick is released unrecorded: no
// replica records it decided on the strength of one job list. This replica
// claims it again after a back-off, as a follower, and normally finds it
// done by the other. A CommitFirst tick recorded before its Dispatch
// returned this (the limit reached after its Precheck) has its record
// withdrawn first: its run did not start. Dispatch must not return it for
// a tick whose run started.
var ErrLeftToOthers = errors.New("scheduler: tick left to a replica whose job list takes it")

// Tick is one scheduled (or manually triggered) run of a job
// (schedule.Tick).
type Tick = schedule.Tick

// Dispatcher hands a claimed tick to whatever runs it: it enqueues a cron
// job's run into asynq, or starts a local job in-process. Dispatch must be
// idempotent per tick ID: a tick that was already dispatched (asynq's task ID
// conflict) returns nil or an error wrapping ErrAlreadyDispatched (which the
// scheduler counts as dispatched), so a replica that takes over a half-done
// claim never runs a tick twice. Any other error leaves the tick unclaimed
// for another try before its starting deadline.
type Dispatcher interface {
	Dispatch(ctx context.Context, t Tick) error
}

// Prechecker is implemented by a Dispatcher that can tell, before a
// CommitFirst tick is recorded as dispatched, that it would not take it:
// Precheck returns an error wrapping ErrJobDone (the tick is recorded as
// decided) or ErrLeftToOthers (released unrecorded), or nil. It only reads:
// Dispatch still decides (a limit reached between the two is settled as
// ErrJobDone after the record; ErrLeftToOthers then withdraws the record).
type Prechecker interface {
	Precheck(ctx context.Context, t Tick) error
}

// Recorder is implemented by a Dispatcher that also keeps a record of the
// ticks that were not dispatched. The scheduler calls NotDispatched after a
// claim for each tick that was paused or missed, with a sentence saying
// why, on every replica whose claim found it so: the replica that recorded
// a tick missed (which alone logs and counts it) may have died before it
// wrote its record. A recorder keeps one record per tick and status. It
// must not block for long: claims wait for it.
type Recorder interface {
	NotDispatched(ctx context.Context, t Tick, paused bool, reason string)
}

// DispatcherFunc adapts a function to Dispatcher.
type DispatcherFunc func(ctx context.Context, t Tick) error

// Dispatch calls f.
func (f DispatcherFunc) Dispatch(ctx context.Context, t Tick) error { return f(ctx, t) }
