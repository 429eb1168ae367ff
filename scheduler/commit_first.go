package scheduler

import (
	"context"
	"errors"
	"time"
)

// recordBefore records a tick done before its run starts (Job.CommitFirst:
// local runs), with a check that its lease is still ours: a tick whose
// record did not reach a quorum is not run. A run that then does not start
// is not tried again (it may have started): its record stays, and the
// history says why it did not run.
type recordBefore struct{}

// errNotRecorded: a CommitFirst tick could not be recorded on a quorum
// before its dispatch (its lease lost, or masters failing): it is not
// dispatched.
var errNotRecorded = errors.New("scheduler: tick not recorded before its run")

func (recordBefore) dispatchOne(ctx context.Context, s *Scheduler, idx int, it item, tick Tick) dispatched {
	if ctx.Err() != nil {
		return dispatched{idx: idx, err: ctx.Err()} // shutting down: released, not run
	}
	if p, ok := s.disp.(Prechecker); ok {
		if err := p.Precheck(ctx, tick); err != nil {
			return dispatched{idx: idx, err: err} // not recorded: settled as not dispatched
		}
	}
	if !s.commitOwned(ctx, it, tick.Fence) {
		return dispatched{idx: idx, err: errNotRecorded}
	}
	return dispatched{idx: idx, err: s.handTo(ctx, it, tick), committed: true}
}

func (recordBefore) settle(ctx context.Context, s *Scheduler, it item, r dispatched) (settlement, string) {
	switch {
	case errors.Is(r.err, errNotRecorded):
		s.add(it.job, func(c *stats) { c.commitErrors.Add(1) })
		s.opts.log.Warn("tick not recorded on a majority of lock masters before its run: not run, released to be claimed again", "job", it.job.Name,
			"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica)
		return toRelease, ""
	case !r.committed:
		// not recorded (shutting down, or its precheck said no): as any
		// tick not recorded yet
		return recordAfter{}.settle(ctx, s, it, r)
	case errors.Is(r.err, ErrAlreadyDispatched):
		r.err = nil // dispatched earlier (by an owner that died before committing): done
	case errors.Is(r.err, ErrJobDone):
		s.markExhausted(it.job)
		return settled, ""
	case errors.Is(r.err, ErrLeftToOthers):
		// the limit was reached after its precheck: its run did not start,
		// so its record is withdrawn, as if it had never been written
		s.leftToOthers(it, r.err)
		return toWithdraw, ""
	}
	if r.err != nil {
		s.add(it.job, func(c *stats) { c.dispatchErrors.Add(1) })
		s.opts.log.Error("tick recorded but its run did not start; it is not retried (it may have started)", "job", it.job.Name,
			"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica, "err", r.err)
		// "done" says it ran: the history says it did not, and why
		reason := "recorded before its run, which did not start (not tried again): " + r.err.Error()
		s.recordNotDispatched(ctx, []item{it}, []notDispatched{{reason: reason}})
		return settled, reason
	}
	s.add(it.job, func(c *stats) { c.dispatched.Add(1) })
	return settled, ""
}

// commitOwned records a CommitFirst tick as dispatched, with a check that
// its lease is still ours, and reports whether a quorum did. Bounded by the
// tick lease ttl, also at shutdown (a tick recorded but not run is lost).
func (s *Scheduler) commitOwned(ctx context.Context, it item, fence int64) bool {
	s.note("committed", it)
	ok := s.toQuorum(context.WithoutCancel(ctx), 1, commitOwnedScript, func(int) ([]string, []any) {
		return []string{it.key(), s.keysOf(it.job).mark(), writerKey(it.key())}, []any{it.token(), it.at.UnixMilli(), s.recordTTL(it.job).Milliseconds(), fence}
	})
	return ok[0]
}
