package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
	names := make([]string, 0, len(s.jobs))
	for name := range s.jobs {
		names = append(names, name)
	}
	per := make([][]int64, len(s.masters))
	var wg sync.WaitGroup
	for mi, rdb := range s.masters {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
			defer cancel()
			pipe := rdb.Pipeline()
			cmds := make([]*redis.StringCmd, len(names))
			for i, n := range names {
				cmds[i] = pipe.Get(cctx, s.jobs[n].keys.mark)
			}
			_, _ = pipe.Exec(cctx)
			per[mi] = make([]int64, len(names))
			for i := range names {
				per[mi][i], _ = strconv.ParseInt(cmds[i].Val(), 10, 64)
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
// claim) and now, within the starting deadline, chosen by the job's catch-up
// policy. Ticks past the deadline, and the ones the policy drops, are logged
// and counted as missed. A job without a mark (never run) catches up
// nothing. It runs beside the live claims: listing and logging up to
// 100,000 ticks per job delays no other job.
func (s *Scheduler) catchUp(now time.Time, marks map[string]int64) []item {
	names := make([]string, 0, len(s.jobs))
	for name := range s.jobs {
		names = append(names, name)
	}

	var out []item
	for _, name := range names {
		j := s.jobs[name]
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
		from := time.UnixMilli(mark).UTC()
		lo := now.Add(-j.StartingDeadline) // a tick before lo is missed
		var missed []time.Time
		more := false
		if from.Before(lo) {
			missed = Ticks(j.Schedule, from, lo.Add(-time.Nanosecond), maxMissedCount)
			more = len(missed) == maxMissedCount
			from = lo.Add(-time.Nanosecond)
		}
		live := Ticks(j.Schedule, from, now, maxMissedCount)
		if len(live)+len(missed) == 0 {
			continue
		}
		keep := live
		switch j.Catchup {
		case CatchupSkip:
			keep = nil
		case CatchupLatest:
			if len(live) > 1 {
				keep = live[len(live)-1:]
			}
		case CatchupAll:
			if len(live) > j.CatchupMax {
				keep = live[len(live)-j.CatchupMax:]
			}
		}
		// the ticks past the deadline are counted here, by the first
		// replica to catch up from this mark; the live ones the policy
		// leaves out are claimed as dropped, which records each missed
		// unless some replica dispatched it, and counts it once
		dropped := missed
		log := s.opts.log.With("job", name, "replica", s.opts.replica)
		if len(dropped) > 0 && !s.firstToCount(j, mark) {
			dropped = nil
		}
		for i, t := range dropped {
			if i == maxMissedLog {
				count := fmt.Sprint(len(dropped) - maxMissedLog)
				if more {
					count = "at least " + count
				}
				log.Warn("more ticks missed while no replica ran", "count", count)
				break
			}
			log.Warn("tick missed while no replica ran", "tick", t.UTC().Format(time.RFC3339), "catchup", j.Catchup)
		}
		s.add(j, func(c *stats) { c.missed.Add(int64(len(dropped))) })
		for _, t := range live[:len(live)-len(keep)] {
			out = append(out, item{job: j, at: t.UTC(), fireAt: now, follower: true, drop: true})
		}
		for _, t := range keep {
			s.add(j, func(c *stats) { c.caughtUp.Add(1) })
			log.Info("catching up a missed tick", "tick", t.UTC().Format(time.RFC3339), "catchup", j.Catchup)
			out = append(out, item{job: j, at: t.UTC(), fireAt: now, follower: true})
		}
	}
	return out
}

// firstToCount reports whether this replica is the first to count the
// ticks a catch-up from job j's mark found missed: a SET NX of
// <counted><mark> on the first lock master (a count, not a safety
// decision: one master decides it). When that master does not answer it
// counts anyway (a count twice beats none).
func (s *Scheduler) firstToCount(j *Job, mark int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.timeout)
	defer cancel()
	won, err := s.masters[0].SetNX(ctx, j.keys.counted+strconv.FormatInt(mark, 10), s.opts.replica, j.StartingDeadline+time.Hour).Result()
	return won || err != nil
}
