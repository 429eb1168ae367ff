package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/quorum"
)

// An outage of the lock masters or the queue Redis while the replicas stay
// up: the ticks that come due meanwhile fail to be claimed or dispatched.
// Retrying each one until it succeeds would dispatch every tick of the
// outage still within its starting deadline at once when Redis is back,
// whatever the job's catch-up policy says. So a tick that fails a second
// time is held back; every heldProbe the held ticks are claimed again as the
// catch-up policy says (skip: none; latest: the newest; all: the newest
// catchup_max), and the rest are claimed as dropped, which records them
// missed unless some replica dispatched them (so each is counted once,
// cluster-wide). While the outage lasts those claims fail too and the ticks
// are held again. The job's current tick (the newest held, whose successor
// is not due yet) is not a missed one: it is always kept.

// heldProbe is how often held ticks are tried again: well within a second,
// so that after a short blip a job's current tick is claimed while it is
// still current (its successor not due), which no policy drops.
const heldProbe = 250 * time.Millisecond

// maxHeld bounds the ticks held per job; older ones are let go (counted
// missed by this replica, with one line, and each recorded not run: no
// master decided them, and another replica may let them go too, which the
// recorder keeps once).
const maxHeld = 1000

type heldTicks struct {
	mu     sync.Mutex
	byJob  map[string][]item
	active bool // an outage is on: warned, not yet over
}

// errQueueDown is the cause of ticks held back because the queue failed.
var errQueueDown = errors.New("the queue Redis failed")

// hold keeps it for the next probe; cause is why its claim or dispatch
// failed (errQueueDown, or the claim's error).
func (s *Scheduler) hold(it item, cause error) {
	if gone := s.holdLocked(it, cause); len(gone) > 0 {
		nd := make([]notDispatched, len(gone))
		for i := range gone {
			nd[i] = notDispatched{idx: i, reason: fmt.Sprintf("held back by an outage beyond the newest %d ticks held for the job: let go as missed (%s)", maxHeld, s.heldBecause(cause))}
		}
		s.recordNotDispatched(context.Background(), gone, nd)
	}
}

// holdLocked adds it to the held ticks and returns those let go.
func (s *Scheduler) holdLocked(it item, cause error) []item {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.byJob == nil {
		s.held.byJob = map[string][]item{}
	}
	if !s.held.active {
		s.held.active = true
		s.opts.log.Warn("holding ticks back: "+s.heldBecause(cause)+"; the jobs' catch-up policies apply to them then",
			"replica", s.opts.replica)
	}
	list := s.held.byJob[it.job.Name]
	if i := slices.IndexFunc(list, func(x item) bool { return x.at.Equal(it.at) }); i >= 0 {
		if it.kind == kindDrop {
			list[i].kind = kindDrop
		}
		return nil
	}
	list = append(list, it)
	var gone []item
	if len(list) > maxHeld {
		slices.SortFunc(list, func(a, b item) int { return a.at.Compare(b.at) })
		n := len(list) - maxHeld
		s.add(it.job, func(c *stats) { c.missed.Add(int64(n)) })
		s.opts.log.Warn("ticks held back too long: letting the oldest go as missed", "job", it.job.Name, "count", n, "replica", s.opts.replica)
		gone = slices.Clone(list[:n])
		list = slices.Delete(list, 0, n)
	}
	s.held.byJob[it.job.Name] = list
	return gone
}

// heldBecause says why ticks are held back: the queue down, lock masters in
// their restart quarantine (which, why, until when), or lock masters not
// answering. A quarantine is not a failure and is not called one.
func (s *Scheduler) heldBecause(cause error) string {
	if errors.Is(cause, errQueueDown) {
		return "the queue Redis is down; they are dispatched once it answers"
	}
	if errors.Is(cause, quorum.ErrQuarantine) || errors.Is(cause, quorum.ErrRestarted) {
		var parts []string
		for _, m := range s.g.Known() {
			switch m.State {
			case quorum.StateQuarantine:
				parts = append(parts, fmt.Sprintf("master %d (%s) until %s by its clock (%s)", m.Idx, m.Addr, m.Until.UTC().Format(time.RFC3339), m.Why))
			case quorum.StateRepairing:
				parts = append(parts, fmt.Sprintf("master %d (%s) being repaired after a restart", m.Idx, m.Addr))
			}
		}
		return fmt.Sprintf("lock masters in their restart quarantine (not failing): %s; they are claimed once a majority votes", strings.Join(parts, "; "))
	}
	if errors.Is(cause, quorum.ErrCorrupt) {
		return fmt.Sprintf("a lock master holds a corrupt value (%v); delete the key it names (see docs/locking.md), they are claimed once it is repaired", cause)
	}
	return fmt.Sprintf("lock masters unreachable (%v); they are claimed once a majority answers", cause)
}

// heldLoop tries the held ticks every heldProbe until ctx ends.
func (s *Scheduler) heldLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		t := s.opts.clock.NewTimer(heldProbe)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		its := s.releaseHeld(s.opts.clock.Now())
		if len(its) > 0 {
			s.reschedule(ctx, its)
		}
	}
}

// releaseHeld takes every held tick and returns them to claim now, with the
// catch-up policy of each job applied: the ticks it leaves out are marked
// drop. When nothing was held since the last call, an outage is over.
func (s *Scheduler) releaseHeld(now time.Time) []item {
	s.held.mu.Lock()
	held := s.held.byJob
	s.held.byJob = nil
	if len(held) == 0 && s.held.active {
		s.held.active = false
		s.opts.log.Info("lock masters vote and the queue answers again: held ticks claimed", "replica", s.opts.replica)
	}
	s.held.mu.Unlock()
	var out []item
	for _, list := range held {
		slices.SortFunc(list, func(a, b item) int { return a.at.Compare(b.at) })
		j := list[0].job
		var live []int // positions of ticks within the starting deadline, not dropped yet
		for i, it := range list {
			if it.kind != kindDrop && !now.After(it.at.Add(j.StartingDeadline)) {
				live = append(live, i)
			}
		}
		// the newest held tick whose successor is not due yet is the job's
		// current tick, not one the outage made it miss: it always runs
		// (a blip of a second must not drop it under skip)
		current := len(live) > 0 && live[len(live)-1] == len(list)-1 && j.Schedule.Next(list[len(list)-1].at).After(now)
		keep := j.catchupKeeps(len(live))
		if current {
			keep = max(keep, 1)
		}
		for k, i := range live {
			if k < len(live)-keep {
				list[i].kind = kindDrop
			}
		}
		for _, it := range list {
			it.fireAt = now
			if !it.kind.follower() {
				it.kind = kindFollower
			}
			out = append(out, it)
		}
	}
	return out
}
