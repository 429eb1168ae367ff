package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/runid"
)

// dispatched is what became of one owned tick handed to the dispatcher.
type dispatched struct {
	idx       int // index of the tick in its batch
	err       error
	committed bool // recorded before the dispatch (recordBefore)
}

// dispatch hands the owned ticks to the dispatcher, at most the scheduler's
// parallelism at a time, and commits the dispatched ones in pipelined chunks
// as they complete, so a big instant's first ticks are recorded done while
// its last ones are still being enqueued. What is left to claim again or to
// hold back, what was dispatched and what was recorded not run go to res.
func (s *Scheduler) dispatch(ctx context.Context, batch []item, owned []claimed, claimedAt time.Time, res *claimResult) {
	results := make(chan dispatched, len(owned))
	var lost []item // leases lost waiting for a slot: set by startDispatches before results closes
	go s.startDispatches(ctx, batch, owned, claimedAt, results, &lost)
	defer func() { res.retry = append(res.retry, lost...) }()

	var commit, failed, left, withdraw []int // batch indices
	flush := func() {
		if len(withdraw) > 0 {
			// recorded before a run that did not start: the record goes,
			// so a replica whose list takes the tick can claim it
			u := make([]unrecorded, len(withdraw))
			for k, i := range withdraw {
				u[k] = unrecorded{idx: i}
			}
			s.unrecord(context.WithoutCancel(ctx), batch, u)
			left = append(left, withdraw...)
			withdraw = nil
		}
		if len(commit) > 0 {
			s.commit(ctx, batch, commit)
			commit = nil
		}
		if len(failed) > 0 {
			again, held := s.retryFailed(ctx, batch, failed)
			res.retry, res.hold = append(res.retry, again...), append(res.hold, held...)
			failed = nil
		}
		if len(left) > 0 {
			res.retry = append(res.retry, s.leaveToOthers(ctx, batch, left)...)
			left = nil
		}
	}
	handle := func(r dispatched) {
		if r.err == nil {
			res.dispatched = append(res.dispatched, batch[r.idx].at)
		}
		st, notRun := recordingOf(batch[r.idx].job).settle(ctx, s, batch[r.idx], r)
		if notRun != "" {
			res.notRun = append(res.notRun, notRunTick{batch[r.idx].at, notRun})
		}
		switch st {
		case toCommit:
			commit = append(commit, r.idx)
		case toRelease:
			failed = append(failed, r.idx)
		case toLeave:
			left = append(left, r.idx)
		case toWithdraw:
			withdraw = append(withdraw, r.idx)
		}
	}
	// commit whenever the results pause, and at least every 256 of them
	for {
		select {
		case r, ok := <-results:
			if !ok {
				flush()
				return
			}
			handle(r)
			if len(commit)+len(failed)+len(left)+len(withdraw) >= 256 {
				flush()
			}
		default:
			flush()
			r, ok := <-results
			if !ok {
				return
			}
			handle(r)
		}
	}
}

// startDispatches starts the dispatch of each owned tick in order, as it
// gets a dispatch slot, sends what became of each on results, and closes
// results once every dispatch returned. While ticks wait for a slot their leases are
// extended every third of the lease ttl, counted from the claim (the timer
// starts with the first wait). When ctx ends (shutting down) the ticks
// still waiting are not dispatched: each is sent with ctx's error, to be
// released. The ticks whose leases were lost while they waited go to lost,
// readied to be claimed again, before results is closed.
func (s *Scheduler) startDispatches(ctx context.Context, batch []item, owned []claimed, claimedAt time.Time, results chan<- dispatched, lost *[]item) {
	var wg sync.WaitGroup
	defer func() { wg.Wait(); close(results) }()
	var extend Timer
	firstExtend := claimedAt.Add(s.opts.leaseTTL / 3)
	defer func() {
		if extend != nil {
			extend.Stop()
		}
	}()
	waiting := owned
	for len(waiting) > 0 {
		c := waiting[0]
		if !s.slot(ctx, &extend, firstExtend) {
			if ctx.Err() != nil {
				// shutting down: the remaining ticks are released, not dispatched
				results <- dispatched{idx: c.idx, err: ctx.Err()}
				waiting = waiting[1:]
				continue
			}
			var again []item
			waiting, again = s.extendLeases(ctx, batch, waiting)
			*lost = append(*lost, again...)
			extend.Reset(s.opts.leaseTTL / 3)
			continue
		}
		waiting = waiting[1:]
		it := batch[c.idx]
		tick := Tick{Job: it.job.Name, At: it.at, RunID: runid.New(), Fence: c.fence, Replica: s.opts.replica, Backfill: it.kind == kindBackfill}
		dctx := ctx
		if c.span != nil {
			dctx = trace.ContextWithSpanContext(ctx, *c.span) // the dispatch's parent
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.sem }()
			results <- recordingOf(it.job).dispatchOne(dctx, s, c.idx, it, tick)
		}()
	}
}

// slot takes a dispatch slot. It returns false when ctx ended, or when the
// extension timer fired first; the first wait starts that timer, to fire at
// firstExtend.
func (s *Scheduler) slot(ctx context.Context, extend *Timer, firstExtend time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	if *extend == nil {
		*extend = s.opts.clock.NewTimer(max(firstExtend.Sub(s.opts.clock.Now()), 0))
	}
	select {
	case s.sem <- struct{}{}:
		return true
	case <-(*extend).C():
		return false
	case <-ctx.Done():
		return false
	}
}

// recording is when a job's ticks are recorded done on the lock masters,
// and so what a dispatch's result leaves to do with the tick's lease.
// recordAfter, the default, records a tick once it is dispatched: a tick
// whose dispatch failed is released and claimed again. recordBefore
// (commit_first.go: Job.CommitFirst, local runs) records it before the run
// starts, since a run in this process cannot be told apart from a second
// one afterwards. recordingOf is the one place that looks at the job.
type recording interface {
	// dispatchOne hands tick (the batch's tick idx, it) to the dispatcher,
	// bounded by the lease ttl.
	dispatchOne(ctx context.Context, s *Scheduler, idx int, it item, tick Tick) dispatched
	// settle counts and logs the result r of dispatching it, and tells what
	// is left to do with its lease, and, for a tick recorded done before a
	// run that did not start, why it did not run (as recorded).
	settle(ctx context.Context, s *Scheduler, it item, r dispatched) (settlement, string)
}

// recordingOf is job's recording.
func recordingOf(job *Job) recording {
	if job.CommitFirst {
		return recordBefore{}
	}
	return recordAfter{}
}

// settlement is what a dispatch result leaves to do with its tick's lease.
type settlement int

const (
	settled    settlement = iota // nothing: recorded before the dispatch
	toCommit                     // dispatched: record the tick done
	toRelease                    // not dispatched: release the lease, try again
	toLeave                      // another replica's job list takes it: release, look again later
	toWithdraw                   // the same, for a tick recorded before the dispatch: withdraw the record first
)

// recordAfter records a tick done once it is dispatched.
type recordAfter struct{}

func (recordAfter) dispatchOne(ctx context.Context, s *Scheduler, idx int, it item, tick Tick) dispatched {
	return dispatched{idx: idx, err: s.handTo(ctx, it, tick)}
}

func (recordAfter) settle(ctx context.Context, s *Scheduler, it item, r dispatched) (settlement, string) {
	switch {
	case errors.Is(r.err, ErrAlreadyDispatched):
		// dispatched earlier (by an owner that died before committing): done
	case errors.Is(r.err, ErrJobDone):
		// decided: not run, and no other replica need try it
		s.markExhausted(it.job)
		return toCommit, ""
	case errors.Is(r.err, ErrLeftToOthers):
		s.leftToOthers(it, r.err)
		return toLeave, ""
	case r.err != nil && ctx.Err() != nil:
		return toRelease, "" // cut short by shutdown: release, no error
	case r.err != nil:
		s.add(it.job, func(c *stats) { c.dispatchErrors.Add(1) })
		s.opts.log.Error("dispatch failed; the tick is released for another try", "job", it.job.Name,
			"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica, "err", r.err)
		return toRelease, ""
	}
	s.add(it.job, func(c *stats) { c.dispatched.Add(1) })
	return toCommit, ""
}

// handTo hands tick (of it) to the dispatcher, bounded by the lease ttl.
func (s *Scheduler) handTo(ctx context.Context, it item, tick Tick) (err error) {
	dctx, cancel := context.WithTimeout(ctx, s.opts.leaseTTL)
	defer cancel()
	if s.opts.tracer != nil {
		var end func(error)
		dctx, end = s.traceDispatch(dctx, tick)
		defer func() { end(err) }()
	}
	err = s.disp.Dispatch(dctx, tick)
	if err == nil && s.opts.onDispatch != nil {
		s.opts.onDispatch(it.job.Name, s.opts.clock.Now().Sub(it.at))
	}
	return err
}

// leftToOthers counts and logs that it's tick was left to a replica whose
// job list takes it (ErrLeftToOthers, why).
func (s *Scheduler) leftToOthers(it item, why error) {
	s.add(it.job, func(c *stats) { c.leftToOthers.Add(1) })
	s.opts.log.Info("tick left to a replica whose job list takes it: released unrecorded", "job", it.job.Name,
		"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica, "why", why)
}

// leaveToOthers releases the leases of the ticks of the batch at the
// indices idx, which another live replica's job list takes
// (ErrLeftToOthers), and looks at them again as a follower a lease ttl
// later: normally they are done by then and dropped. A tick no other
// replica took is claimed and offered again, until its starting deadline
// records it missed. No attempt is counted: this is no failure. It returns
// the ticks readied to be claimed again.
func (s *Scheduler) leaveToOthers(ctx context.Context, batch []item, idx []int) []item {
	s.releaseLeases(context.WithoutCancel(ctx), batch, idx)
	again := make([]item, 0, len(idx))
	for _, i := range idx {
		it := retryAt(batch[i], s.opts.clock.Now().Add(s.opts.leaseTTL))
		it.attempts = batch[i].attempts
		again = append(again, it)
	}
	return again
}

// retryFailed releases the leases of the ticks of the batch at the indices
// idx, which were not dispatched, and returns them to claim again after a
// back-off (again), or to hold back when the queue fails again (an
// outage). The release goes out even when ctx ended (shutdown), bounded by
// the master timeout.
func (s *Scheduler) retryFailed(ctx context.Context, batch []item, idx []int) (again []item, held []heldTick) {
	s.releaseLeases(context.WithoutCancel(ctx), batch, idx)
	// back off harder each time: a queue that is slow to answer
	// must not be answered with more work
	for _, i := range idx {
		it := batch[i]
		if it.attempts > 0 && ctx.Err() == nil {
			// the queue failing again: an outage; held back until
			// it answers, then claimed as the catch-up policy says
			held = append(held, heldTick{it, errQueueDown})
			continue
		}
		wait := time.Duration(100+rand.IntN(200)) * time.Millisecond << min(it.attempts, 5)
		again = append(again, retryAt(it, s.opts.clock.Now().Add(wait)))
	}
	return again, held
}
