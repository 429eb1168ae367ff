package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A master found restarted (no marker, or the marker of another process) is
// repaired: it gets a marker naming its running process and a fence floor,
// the highest clock (µs) read on the masters that answer. Every fence ever
// issued is at most the clock of the master that issued it at that moment
// (fences start from a clock and grow by one per grant, far slower than a
// microsecond clock), so a floor read later is above all of them: counters
// this master reloaded from an old snapshot, or lost, can never issue a
// fence that goes back. Nothing is scanned or copied, so a repair takes one
// round trip per master whatever the number of lock names, and a source
// master restarting meanwhile cannot roll back what it contributes (a clock).
// Each round still reads every master's identity again at its end and starts
// over when one changed, so a round's view of the set is never mixed.
//
// Then the master waits out the quarantine, counted on its own clock from the
// moment it may have lost writes (BORN: its process's start when it came back
// from a snapshot, the repair when its marker was missing, which a flush of a
// live process causes too): every lock it forgot has expired by then.
// When no master carries a marker at all (a brand-new deployment, or every
// master restarted empty at once, which Redis cannot tell apart), the safe
// answer is the same quarantine; with Options.Fresh they are marked "fresh"
// and vote at once.

// repairLater starts one background repair of m unless one is running, and
// returns a channel closed when it ends. Callers hold m.mu.
func (g *Group) repairLater(m *Master) <-chan struct{} {
	if m.repairing != nil {
		return m.repairing
	}
	done := make(chan struct{})
	if g.Closed() || !g.bg.Spawn(func() {
		err := g.repair(g.ctx, m)
		if err != nil && !g.Closed() {
			g.opts.Logger.Printf("quorum: repair of master %d (%s) failed; it stays out of quorums and is retried on the next call: %v", m.Idx, m.Addr, err)
		}
		m.mu.Lock()
		m.repairing = nil
		m.mu.Unlock()
		close(done)
	}) {
		close(done)
		return done
	}
	m.repairing = done
	return done
}

// probe is one master's state as a repair reads it.
type probe struct {
	m   *Master
	id  identity
	us  int64 // server clock, µs
	err error
}

// repairRounds bounds the rounds of one repair whose view changed under it.
const repairRounds = 3

// repair marks m (and, for a fresh set, every unmarked master). One repair
// runs at a time in a group: concurrent ones would judge "fresh" on views
// the other is changing.
func (g *Group) repair(ctx context.Context, m *Master) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g.repairMu.Lock()
	defer g.repairMu.Unlock()
	waits := 0
	for round := 0; round < repairRounds; {
		again, waited, err := g.repairRound(ctx, m, waits < freshWaits)
		switch {
		case err != nil:
			return err
		case !again:
			return nil
		case waited:
			waits++
		default:
			round++
		}
	}
	return fmt.Errorf("the masters kept restarting during %d repair rounds", repairRounds)
}

// repairRound runs one round; again reports that a master restarted during
// it, or (waited) that another client is marking a fresh deployment right
// now and the round waited for it; either way it must be run again. When it
// may not wait any more, a fresh marking that has not reached m did not
// include it: m is marked as restarted.
func (g *Group) repairRound(ctx context.Context, m *Master, mayWait bool) (again, waited bool, err error) {
	if g.testHook != nil {
		g.testHook("round", m)
	}
	ps := g.probeAll(ctx)
	self := ps[m.Idx]
	if self.err != nil {
		return false, false, fmt.Errorf("reading master %d: %w", m.Idx, self.err)
	}
	if mk, ok := parseMarker(self.id.marker); self.id.hasMarker && ok && mk.runID == self.id.runID {
		m.Invalidate() // repaired meanwhile (another client): check again
		return false, false, nil
	}
	answered, marked, marking := 0, 0, 0
	var floor int64
	for _, p := range ps {
		if p.err != nil {
			continue
		}
		answered++
		floor = max(floor, p.us)
		if p.id.hasMarker {
			marked++
		}
		if markingFresh(p) {
			marking++
		}
	}
	if marking > 0 && marking == marked && mayWait {
		// another client is marking a brand-new set: its marking reaches m
		// in a moment, or m was not part of it
		t := time.NewTimer(freshWait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false, false, ctx.Err()
		}
		return true, true, nil
	}
	// brand new only if every master answered without a trace: an
	// unreachable master may carry one (and its clock may be ahead)
	fresh := marked == 0 && answered == len(g.masters)
	targets := []probe{self}
	if fresh {
		targets = targets[:0]
		for _, p := range ps {
			if p.err == nil && !p.id.hasMarker {
				targets = append(targets, p)
			}
		}
	}
	if g.testHook != nil {
		g.testHook("probed", m)
	}
	for _, t := range targets {
		mk := marker{runID: t.id.runID, floor: floor + 1, fresh: fresh && g.opts.Fresh}
		// writes were lost at the process's start when the marker names
		// another process (a snapshot), and at the latest now when it is
		// missing (a restart, or a flush of a live process)
		var lostAgo time.Duration
		if t.id.hasMarker {
			lostAgo = t.id.uptime
		}
		if err := g.mark.Run(ctx, t.m.RDB, []string{g.opts.Marker}, t.id.marker, runIDArg(t.id.runID), mk.floor, kindArg(mk.fresh, t.id.hasMarker), lostAgo.Milliseconds()).Err(); err != nil {
			return false, false, fmt.Errorf("marking master %d: %w", t.m.Idx, err)
		}
	}
	// the view must not have changed under the round: a master that
	// restarted meanwhile may have been marked with its old process's id
	// (harmless: it is found restarted again) or have given a stale view
	for _, p := range g.probeAll(ctx) {
		// a master that answered the first read but not this one cannot
		// vouch that it is the process the round saw
		if q := ps[p.m.Idx]; q.err == nil && (p.err != nil || p.id.runID != q.id.runID) {
			again = true
		}
	}
	for _, t := range targets {
		t.m.Invalidate()
	}
	if again {
		return true, false, nil
	}
	// the quarantine that follows is warned of when a check finds it (in
	// every process, once): here only what the repair did
	switch {
	case fresh && g.opts.Fresh:
		g.infof("quorum: no master carried a marker: marked %s as a brand-new deployment (fresh deployment opted in), voting at once", masters(len(targets)))
	case fresh:
		g.infof("quorum: no master carried a marker (a brand-new deployment, or every master restarted empty at once): marked %s, each in its restart quarantine of %v", masters(len(targets)), g.opts.Quarantine)
	case self.id.hasMarker:
		g.opts.Logger.Printf("quorum: master %d (%s) restarted from a snapshot older than its last writes: marked with fence floor %d; it votes once it has been up for %v", m.Idx, m.Addr, floor+1, g.opts.Quarantine)
	default:
		g.infof("quorum: master %d (%s) restarted empty: marked with fence floor %d, in its restart quarantine of %v", m.Idx, m.Addr, floor+1, g.opts.Quarantine)
	}
	return false, false, nil
}

// Replicas of a brand-new deployment that start together must not find one
// another's fresh markers half-written and quarantine the masters they reach
// next: a repair that finds fresh markers written in the last freshWindow
// (and no others) waits freshWait and reads again, up to freshWaits times. Only a marking that reached the master counts: a master that
// restarted after it is marked as restarted (the window never makes a
// restarted master fresh).
const (
	freshWindow = 3 * time.Second
	freshWait   = 100 * time.Millisecond
	freshWaits  = 20
)

// markingFresh reports whether p carries a fresh marker written in the last
// freshWindow (by its own clock): a fresh deployment being marked now.
func markingFresh(p probe) bool {
	mk, ok := parseMarker(p.id.marker)
	return ok && mk.fresh && mk.runID == p.id.runID && p.us-mk.floor < freshWindow.Microseconds()
}

func runIDArg(id string) string {
	if id == "" {
		return "-"
	}
	return id
}

// kindArg is the KIND of a marker written by a repair (see marker).
func kindArg(fresh, hadMarker bool) string {
	switch {
	case fresh:
		return kindFresh
	case hadMarker:
		return kindSnapshot
	}
	return kindEmpty
}

// probeAll reads every master's identity, marker and clock in parallel.
func (g *Group) probeAll(ctx context.Context) []probe {
	ps := make([]probe, len(g.masters))
	var wg sync.WaitGroup
	for i, m := range g.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := probe{m: m}
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			defer cancel()
			p.id, p.err = m.identity(cctx)
			if p.err != nil && IsNetErr(p.err) && cctx.Err() == nil {
				p.id, p.err = m.identity(cctx) // a broken connection: once more, on a new one
			}
			p.us = p.id.now.UnixMicro()
			ps[i] = p
		}()
	}
	wg.Wait()
	return ps
}

// Prepare checks every master now (Admit), starting the repair of those that
// restarted, and returns an error only when no master answered at all.
func (g *Group) Prepare(ctx context.Context) error {
	errs := make([]error, len(g.masters))
	var wg sync.WaitGroup
	for i, m := range g.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			defer cancel()
			_, errs[i] = m.Admit(cctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || !IsNetErr(err) || errors.Is(err, ErrRestarted) || errors.Is(err, ErrQuarantine) {
			return nil // it answered
		}
	}
	return fmt.Errorf("no master answered: %w", errs[0])
}
