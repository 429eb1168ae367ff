package locking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/internal/quorum"
)

// ErrQuarantine is a master's part in a failure while it waits out its
// restart quarantine (see WithRestartQuarantine): it was found without a
// marker (a brand-new server, or one restarted empty) or with the marker of
// another server process (reloaded from a snapshot). Its error text names
// the master, why, and until when by its clock. A brand-new set of masters
// skips the wait with InitFresh.
var ErrQuarantine = quorum.ErrQuarantine

// ErrMarked is InitFresh's refusal: a master already carries a marker, or
// did not answer. Nothing was marked.
var ErrMarked = errors.New("locking: not a brand-new set of masters")

// MasterState is whether a master takes part in locks now.
type MasterState string

// Master states.
const (
	// MasterVoting: it takes part in every lock.
	MasterVoting MasterState = quorum.StateVoting
	// MasterQuarantine: it waits out its restart quarantine (Why, Until).
	MasterQuarantine MasterState = quorum.StateQuarantine
	// MasterRepairing: it carries no marker of its running process; the
	// first client that calls it marks it, and it then waits out the
	// quarantine (Until is the earliest end).
	MasterRepairing MasterState = quorum.StateRepairing
	// MasterUnreachable: it did not answer (Err).
	MasterUnreachable MasterState = quorum.StateUnreachable
)

// Reasons a master does not vote (MasterStatus.Why).
const (
	// WhyNoMarker: a brand-new server, or one restarted empty (or flushed).
	WhyNoMarker = quorum.WhyNoMarker
	// WhyOtherProcess: a server reloaded from a snapshot.
	WhyOtherProcess = quorum.WhyOtherProcess
)

// MasterStatus is one master's part in the client's locks at one moment.
type MasterStatus struct {
	Index int         `json:"index"` // position in the list given to New
	Addr  string      `json:"addr"`  // address, without credentials
	State MasterState `json:"state"`
	// Why it does not vote: WhyNoMarker, WhyOtherProcess, or another reason.
	Why string `json:"why,omitempty"`
	// Until is when it votes again by its own clock (for a master still to
	// be repaired: at the earliest), and UntilLocal the same moment by this
	// process's clock. Zero while it votes.
	Until      time.Time `json:"until,omitzero"`
	UntilLocal time.Time `json:"until_local,omitzero"`
	// Err is why it is unreachable.
	Err string `json:"error,omitempty"`
}

// Masters reads every master's identity, marker and clock, in parallel
// (each within ctx and at most 2s), and reports whether it votes, and if not
// why and until when. It only reads: a master found restarted is repaired by
// the next lock call, not by Masters.
func (c *Client) Masters(ctx context.Context) []MasterStatus {
	sts := c.g.Status(ctx)
	out := make([]MasterStatus, len(sts))
	for i, s := range sts {
		out[i] = MasterStatus{Index: s.Idx, Addr: s.Addr, State: MasterState(s.State), Why: s.Why,
			Until: s.Until, UntilLocal: s.UntilLocal}
		if s.Err != nil {
			out[i].Err = s.Err.Error()
		}
	}
	return out
}

// InitFresh marks a brand-new set of masters, once, before first use, so
// that they vote at once instead of waiting out the restart quarantine
// (Redis cannot tell a brand-new server from one restarted empty; this call
// is the operator saying which). Every master must answer and none may
// carry a marker: otherwise it fails with ErrMarked, naming each master
// that carries one (in use, marked before, or reloaded from a snapshot) or
// did not answer, and marks nothing. Masters that restart empty later wait
// out the quarantine as always. Call it by hand for a new set, never at
// every start: a set whose masters all restarted empty at once carries no
// marker either. `baton init` calls it.
func (c *Client) InitFresh(ctx context.Context) error {
	err := c.g.MarkFresh(ctx)
	if errors.Is(err, quorum.ErrMarked) {
		return fmt.Errorf("%w: %w", ErrMarked, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}
