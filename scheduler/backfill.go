package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// BackfillResult says what Backfill did with each tick it was given.
type BackfillResult struct {
	// Dispatched are the ticks this call dispatched.
	Dispatched []time.Time
	// Decided are the ticks it found dispatched already (by the schedule,
	// or by a backfill racing this one).
	Decided []time.Time
	// Failed are the ticks it could not dispatch before ctx ended, or that
	// no majority of lock masters could vouch for (a master restarted after
	// the tick and may have lost its record), with the last reason.
	Failed []time.Time
	Reason string
}

// ErrBackfillRunning is returned by Backfill on a scheduler that runs (Run):
// a backfill uses a scheduler of its own.
var ErrBackfillRunning = errors.New("scheduler: Backfill on a running scheduler")

// Backfill dispatches job's ticks at the instants given (past ones, each due
// by the job's schedule) through the claim of scheduled ticks, with one
// difference: a tick recorded missed or paused, or with no record, is
// granted whatever its age and the pause flag. A tick recorded done or
// leased is not, so each tick is dispatched at most once, also with several
// backfills racing each other or the schedule; a claim that loses a race
// waits for the winner and finds the tick done. A tick's record expires
// with its retention: whether an older tick ran must be known otherwise
// (the caller checks the run history) before it is handed to Backfill.
//
// It is meant for a scheduler made for it (New, never Run) and returns when
// every tick is dispatched, decided or failed, or when ctx ends (the ticks
// left count as failed).
func (s *Scheduler) Backfill(ctx context.Context, job string, ticks []time.Time) (BackfillResult, error) {
	var res BackfillResult
	j, ok := s.job(job)
	if !ok {
		return res, fmt.Errorf("scheduler: backfill: no job %q", job)
	}
	if s.running.Load() {
		return res, ErrBackfillRunning
	}
	dispatched := map[time.Time]bool{}  // ticks this call dispatched
	unvouched := map[time.Time]string{} // ticks recorded not run, and why
	pending := make([]item, 0, len(ticks))
	for _, at := range ticks {
		// follower: the first claim reads the record before it claims
		pending = append(pending, item{job: j, at: at.UTC(), fireAt: s.opts.clock.Now(), kind: kindBackfill})
	}
	final := map[time.Time]bool{} // ticks no claim will come back to
	for len(pending) > 0 {
		slices.SortFunc(pending, func(a, b item) int { return a.fireAt.Compare(b.fireAt) })
		if wait := pending[0].fireAt.Sub(s.opts.clock.Now()); wait > 0 {
			t := s.opts.clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		now := s.opts.clock.Now()
		n := 0
		for n < len(pending) && !pending[n].fireAt.After(now) {
			n++
		}
		batch := slices.Clone(pending[:n])
		pending = pending[n:]
		ats := make([]time.Time, len(batch)) // process reuses batch's array
		for i, it := range batch {
			ats[i] = it.at
		}
		cr := s.process(ctx, batch)
		for _, at := range cr.dispatched {
			dispatched[at] = true
		}
		for _, n := range cr.notRun {
			unvouched[n.at] = n.reason
		}
		back := cr.retry
		for _, h := range cr.hold {
			// no loop probes held ticks: a backfill claims them again
			// itself, a second later
			back = append(back, retryAt(h.it, s.opts.clock.Now().Add(time.Second)))
		}
		pending = append(pending, back...)
		again := make(map[time.Time]bool, len(back))
		for _, b := range back {
			again[b.at] = true
		}
		for _, at := range ats {
			if !again[at] {
				final[at] = true
			}
		}
	}
	for _, at := range ticks {
		at = at.UTC()
		switch {
		case dispatched[at]:
			res.Dispatched = append(res.Dispatched, at)
		case unvouched[at] != "":
			res.Failed = append(res.Failed, at)
			res.Reason = unvouched[at]
		case final[at]:
			res.Decided = append(res.Decided, at)
		default:
			res.Failed = append(res.Failed, at)
			res.Reason = "not dispatched before the backfill ended"
			if ctx.Err() != nil {
				res.Reason += ": " + context.Cause(ctx).Error()
			}
		}
	}
	return res, nil
}
