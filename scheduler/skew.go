package scheduler

import (
	"context"
	"slices"
	"time"
)

const skewInterval = 5 * time.Second

// skewLoop compares this replica's clock with Redis TIME on the lock masters
// every few seconds. Past the bound the replica warns and stops claiming
// until its clock is back inside it: tick identity does not depend on local
// clocks, but a replica whose clock is far off fires at the wrong moments.
// The first check runs in Run, before anything is claimed.
func (s *Scheduler) skewLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		t := s.opts.clock.NewTimer(skewInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		s.checkSkew(ctx)
	}
}

// checkSkew measures the skew against every master (midpoint of the round
// trip) and judges by the median.
func (s *Scheduler) checkSkew(ctx context.Context) {
	var skews []time.Duration
	for _, rdb := range s.masters {
		cctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
		t0 := s.opts.clock.Now()
		rt, err := rdb.Time(cctx).Result()
		t1 := s.opts.clock.Now()
		cancel()
		// a slow round trip (a busy Redis) says nothing about clocks
		if err != nil || t1.Sub(t0) > s.opts.maxSkew/2 {
			continue
		}
		mid := t0.Add(t1.Sub(t0) / 2)
		skews = append(skews, mid.Sub(rt))
	}
	if len(skews) == 0 {
		return
	}
	slices.Sort(skews)
	skew := skews[len(skews)/2]
	s.skew.Store(int64(skew))
	bad := skew > s.opts.maxSkew || skew < -s.opts.maxSkew
	if bad != s.skewBad.Load() {
		s.skewBad.Store(bad)
		if bad {
			s.stats.skewStops.Add(1)
			s.opts.log.Warn("replica clock is off Redis TIME beyond the bound: stopped claiming", "skew", skew, "bound", s.opts.maxSkew, "replica", s.opts.replica)
		} else {
			s.opts.log.Info("replica clock back within the bound: claiming again", "skew", skew, "replica", s.opts.replica)
		}
	}
}

// Skewed reports whether the last check found this replica's clock beyond the
// bound (and so not claiming).
func (s *Scheduler) Skewed() bool { return s.skewBad.Load() }

// ClockSkew is how far this replica's clock was ahead of the lock masters'
// (the median; negative: behind) at the last check.
func (s *Scheduler) ClockSkew() time.Duration { return time.Duration(s.skew.Load()) }
