package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

// maxMissedLog bounds the per-tick log lines of one job's catch-up; the rest
// are counted and summarised.
const maxMissedLog = 20

// maxMissedCount bounds the ticks of one job a catch-up lists, on each side
// of the starting deadline.
const maxMissedCount = 100000

// readMarks reads every job's mark on every master (in parallel, each
// bounded by the master timeout) and returns the highest per job. It runs
// before the first claim: a live claim advances its job's mark, and a
// catch-up that read the mark after that would list nothing.
func (s *Scheduler) readMarks(ctx context.Context) map[string]int64 {
	js := s.snapshot()
	names := make([]string, len(js))
	for i, j := range js {
		names[i] = j.Name
	}
	per := make([][]int64, len(s.masters))
	var wg sync.WaitGroup
	for mi, rdb := range s.masters {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
			defer cancel()
			pipe := rdb.Pipeline()
			cmds := make([]*redis.StringCmd, len(names))
			for i := range names {
				cmds[i] = pipe.Get(cctx, s.keysOf(js[i]).mark())
			}
			_, _ = pipe.Exec(cctx)
			per[mi] = make([]int64, len(names))
			for i, n := range names {
				v, err := cmds[i].Result()
				if err != nil {
					continue // absent (or the master failed: no mark from it)
				}
				m, ok := quorum.ParseCounter(v)
				if !ok {
					// no catch-up from it; the job's claims report it too
					s.opts.log.Warn("corrupt job mark: not read for the catch-up; delete or correct the key", "job", n,
						"err", fmt.Sprintf("key %q on lock master %d holds %q, not a time in unix ms", s.keysOf(js[i]).mark(), mi, v))
					continue
				}
				per[mi][i] = m
			}
		})
	}
	wg.Wait()
	marks := make(map[string]int64, len(names))
	for _, vals := range per {
		for i, n := range names {
			marks[n] = max(marks[n], vals[i])
		}
	}
	return marks
}

// catchUp lists the ticks to claim at start: for each job, the ticks between
// its mark (the latest tick any replica decided, as read before the first
// claim) or its definition's Since, whichever is later, and now, within
// the starting deadline, chosen by the job's catch-up policy. Ticks past
// the deadline, and the ones the policy drops, are logged and counted as
// missed. A job without a mark (never run) catches up
// nothing. It runs beside the live claims: listing and logging up to
// 100,000 ticks per job delays no other job.
func (s *Scheduler) catchUp(now time.Time, marks map[string]int64) []item {
	// one job's catch-up: what its policy keeps and leaves out
	type plan struct {
		j                  *Job
		mark               int64
		missed, live, keep []time.Time
		more               bool
	}
	var plans []plan
	var counting []*Job // jobs with ticks past the deadline to count
	var countMarks []int64
	for _, j := range s.snapshot() {
		name := j.Name
		if j.LeaderOnly && (s.opts.leader == nil || !s.opts.leader()) {
			continue
		}
		mark, ok := marks[name]
		if !ok || mark == 0 {
			continue
		}
		// ticks older than the starting deadline are missed; the live ones
		// are listed from there on, not from the mark: after a long outage
		// the mark's first 100,000 ticks can all be long past their deadline
		p := plan{j: j, mark: mark}
		from := time.UnixMilli(mark).UTC()
		// a definition made after the mark (a replace) starts at its
		// Since: its ticks before then were never due, and the old
		// definition's were the replicas' that held it to decide
		if since := j.Since.Add(-time.Nanosecond); since.After(from) {
			from = since
		}
		lo := now.Add(-j.StartingDeadline) // a tick before lo is missed
		if from.Before(lo) {
			p.missed = Ticks(j.Schedule, from, lo.Add(-time.Nanosecond), maxMissedCount)
			p.more = len(p.missed) == maxMissedCount
			from = lo.Add(-time.Nanosecond)
		}
		p.live = Ticks(j.Schedule, from, now, maxMissedCount)
		if len(p.live)+len(p.missed) == 0 {
			continue
		}
		p.keep = p.live[len(p.live)-j.catchupKeeps(len(p.live)):]
		if len(p.missed) > 0 {
			counting = append(counting, j)
			countMarks = append(countMarks, mark)
		}
		plans = append(plans, p)
	}
	// the ticks past the deadline are counted here, by the first replica to
	// catch up from this mark (one pipeline for all jobs); the live ones the
	// policy leaves out are claimed as dropped, which records each missed
	// unless some replica dispatched it, and counts it once
	first := s.firstToCount(counting, countMarks)

	var out []item
	for _, p := range plans {
		j := p.j
		dropped := p.missed
		if len(dropped) > 0 && !first[j] {
			dropped = nil
		}
		log := s.opts.log.With("job", j.Name, "replica", s.opts.replica)
		for i, t := range dropped {
			if i == maxMissedLog {
				count := fmt.Sprint(len(dropped) - maxMissedLog)
				if p.more {
					count = "at least " + count
				}
				log.Warn("more ticks missed while no replica ran", "count", count)
				break
			}
			log.Warn("tick missed while no replica ran", "tick", t.UTC().Format(time.RFC3339), "catchup", string(j.Catchup))
		}
		s.add(j, func(c *stats) { c.missed.Add(int64(len(dropped))) })
		for _, t := range p.live[:len(p.live)-len(p.keep)] {
			out = append(out, item{job: j, at: t.UTC(), fireAt: now, kind: kindDrop})
		}
		for _, t := range p.keep {
			s.add(j, func(c *stats) { c.caughtUp.Add(1) })
			log.Info("catching up a missed tick", "tick", t.UTC().Format(time.RFC3339), "catchup", string(j.Catchup))
			out = append(out, item{job: j, at: t.UTC(), fireAt: now, kind: kindFollower})
		}
	}
	return out
}

// catchupKeeps is how many of n ticks a job missed (oldest first, all
// still inside its starting deadline) its catch-up policy claims: the
// newest ones, none (skip), one (latest) or up to CatchupMax (all). The
// others are left out: claimed as dropped. The one choice for a catch-up
// after a start (catchUp) and after an outage (releaseHeld).
func (j *Job) catchupKeeps(n int) int {
	switch j.Catchup {
	case CatchupSkip:
		return 0
	case CatchupLatest:
		return min(n, 1)
	case CatchupAll:
		return min(n, j.CatchupMax)
	}
	return n
}

// firstToCount reports, for each job and the mark its catch-up started
// from, whether this replica is the first to count the ticks that catch-up
// found missed: a SET NX of <counted><mark> on the first lock master, all in
// one pipeline (a count, not a safety decision: one master decides it).
// When that master does not answer it counts anyway (a count twice beats
// none).
func (s *Scheduler) firstToCount(js []*Job, marks []int64) map[*Job]bool {
	out := make(map[*Job]bool, len(js))
	if len(js) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.timeout)
	defer cancel()
	pipe := s.masters[0].Pipeline()
	cmds := make([]*redis.BoolCmd, len(js))
	for i, j := range js {
		cmds[i] = pipe.SetNX(ctx, s.keysOf(j).countedKey(marks[i]), s.opts.replica, j.StartingDeadline+time.Hour)
	}
	_, _ = pipe.Exec(ctx)
	for i, j := range js {
		won, err := cmds[i].Result()
		out[j] = won || err != nil
	}
	return out
}
