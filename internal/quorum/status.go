package quorum

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// States of a master (Status.State).
const (
	// StateVoting: it takes part in quorums.
	StateVoting = "voting"
	// StateQuarantine: repaired after a restart (or found brand-new), it
	// waits out the restart quarantine.
	StateQuarantine = "quarantine"
	// StateRepairing: it carries no marker of its running process; the next
	// call marks it, and it then waits out the quarantine.
	StateRepairing = "repairing"
	// StateUnreachable: it did not answer.
	StateUnreachable = "unreachable"
)

// Status is one master's part in the group at one moment.
type Status struct {
	Idx   int
	Addr  string
	State string // State...
	// Why it does not vote (WhyNoMarker, WhyOtherProcess, ...); empty
	// while it votes.
	Why string
	// Until is when it votes, by its own clock (for a master still to be
	// repaired: at the earliest), and UntilLocal the same moment by this
	// process's clock. Zero while it votes or when unreachable.
	Until, UntilLocal time.Time
	// Err is why it is unreachable.
	Err error
}

// Status reads every master's identity, marker and clock, in parallel, and
// says whether it votes, and if not why and until when. It only reads: a
// master found restarted is not repaired by it.
func (g *Group) Status(ctx context.Context) []Status {
	ps := g.probeAll(ctx)
	out := make([]Status, len(ps))
	for i, p := range ps {
		out[i] = g.statusOf(p)
	}
	return out
}

func (g *Group) statusOf(p probe) Status {
	st := Status{Idx: p.m.Idx, Addr: p.m.Addr, State: StateVoting}
	if p.err != nil {
		st.State, st.Err = StateUnreachable, p.err
		return st
	}
	if !p.m.tracked {
		return st // its restarts are not detected (a Cluster)
	}
	local := func(t time.Time) time.Time { return time.Now().Add(t.Sub(p.id.now)) }
	mk, ok := parseMarker(p.id.marker)
	switch {
	case !p.id.hasMarker || !ok:
		st.State, st.Why = StateRepairing, WhyNoMarker
		st.Until = p.id.now.Add(g.opts.Quarantine)
	case mk.runID != p.id.runID:
		st.State, st.Why = StateRepairing, WhyOtherProcess
		st.Until = p.id.now.Add(g.opts.Quarantine - p.id.uptime)
		if !st.Until.After(p.id.now) {
			st.Until = p.id.now // up longer than the quarantine: votes once repaired
		}
	default:
		votes := time.UnixMilli(mk.born).Add(g.opts.Quarantine)
		if mk.fresh || !p.id.now.Before(votes) {
			return st
		}
		st.State, st.Why, st.Until = StateQuarantine, mk.reason(), votes
	}
	st.UntilLocal = local(st.Until)
	return st
}

// Known is every master's state as this process last found it, without
// contacting any and without waiting for a check under way: voting (or not
// checked yet), in quarantine (why, until when), or restarted and waiting
// for its repair.
func (g *Group) Known() []Status {
	out := make([]Status, len(g.masters))
	for i, m := range g.masters {
		st := Status{Idx: m.Idx, Addr: m.Addr, State: StateVoting}
		if k := m.known.Load(); k != nil && (k.State != StateQuarantine || time.Now().Before(k.UntilLocal)) {
			st = *k
		}
		out[i] = st
	}
	return out
}

// ErrMarked is MarkFresh's refusal: a master carries a marker, or did not
// answer (it may carry one). Nothing was marked.
var ErrMarked = errors.New("nothing marked")

// MarkFresh marks a brand-new set of masters so that they vote at once,
// without the restart quarantine: it is an operator's statement that no
// lock was ever granted on them. It refuses with ErrMarked, naming them,
// when any master carries a marker (of its running process: the set is in
// use or was marked before; of another process: it came back from a
// snapshot) or does not answer. A master marked by another client between
// the read and the write keeps that client's marker and is named in the
// error (the others stay marked fresh).
func (g *Group) MarkFresh(ctx context.Context) error {
	g.repairMu.Lock()
	defer g.repairMu.Unlock()
	ps := g.probeAll(ctx)
	var refused []string
	var floor int64
	for _, p := range ps {
		switch {
		case p.err != nil:
			refused = append(refused, fmt.Sprintf("master %d (%s) did not answer (%v), and may carry a marker", p.m.Idx, p.m.Addr, p.err))
		case p.id.hasMarker:
			refused = append(refused, fmt.Sprintf("master %d (%s) carries %s", p.m.Idx, p.m.Addr, describeMarker(p)))
		}
		floor = max(floor, p.us)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %s", ErrMarked, strings.Join(refused, "; "))
	}
	var raced []string
	for _, p := range ps {
		n, err := g.mark.Run(ctx, p.m.RDB, []string{g.opts.Marker}, "", runIDArg(p.id.runID), floor+1, kindFresh, 0).Int()
		switch {
		case err != nil:
			raced = append(raced, fmt.Sprintf("master %d (%s): %v", p.m.Idx, p.m.Addr, err))
		case n == 0:
			raced = append(raced, fmt.Sprintf("master %d (%s) was marked meanwhile by a running client, whose marker it keeps", p.m.Idx, p.m.Addr))
		}
		p.m.Invalidate()
	}
	if len(raced) > 0 {
		return fmt.Errorf("marking a brand-new set of masters: %s", strings.Join(raced, "; "))
	}
	g.infof("quorum: marked %s as a brand-new set: they vote at once", masters(len(ps)))
	return nil
}

// describeMarker says what the marker a master carries means.
func describeMarker(p probe) string {
	mk, ok := parseMarker(p.id.marker)
	switch {
	case !ok:
		return "a marker of an unknown format"
	case mk.runID != p.id.runID:
		return "the marker of another server process (" + WhyOtherProcess + ")"
	case mk.fresh:
		return "a marker of its running process, marked as a brand-new set already: it votes, nothing to do"
	}
	votes := time.UnixMilli(mk.born).Add(p.m.g.opts.Quarantine)
	if p.id.now.Before(votes) {
		return fmt.Sprintf("a marker of its running process, written by the first client that used it, which found %s; its restart quarantine ends by itself at %s by its clock, in %v; nothing to do but wait",
			mk.reason(), votes.UTC().Format(time.RFC3339), votes.Sub(p.id.now).Round(time.Second))
	}
	return "a marker of its running process (in use, voting: nothing to do)"
}

// masters is "1 master" or "N masters", for log lines.
func masters(n int) string {
	if n == 1 {
		return "1 master"
	}
	return fmt.Sprintf("%d masters", n)
}
