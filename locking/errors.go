package locking

import (
	"errors"
	"fmt"
	"strings"

	"github.com/batonhq/baton/internal/quorum"
)

// Errors returned by this package. Compare with errors.Is: most are wrapped with
// details (the key, the masters that failed and why).
var (
	// ErrNotObtained means the lock is held by someone else: TryLock found it
	// taken, or Lock's context ended while waiting for it.
	ErrNotObtained = errors.New("locking: not obtained")

	// ErrUnavailable means too few masters answered to decide: a quorum could
	// not be reached because of Redis errors, not because someone holds the lock.
	ErrUnavailable = errors.New("locking: unavailable")

	// ErrNotHeld is returned by Release and Extend when the lease is no longer
	// held: it was lost (see Lease.Err for why) or already released.
	ErrNotHeld = errors.New("locking: not held")

	// ErrLost is a lease's end reason when the lock was lost while held: a
	// quorum of masters no longer had the key, or no extension was confirmed
	// before the validity deadline. Someone else may hold the lock now.
	ErrLost = errors.New("locking: lost")

	// ErrReleased is a lease's end reason after Release.
	ErrReleased = errors.New("locking: released")

	// ErrHoldLimit is a lease's end reason when auto-extension stopped at the
	// configured cap (WithMaxHold, WithMaxExtensions) and the validity ran out.
	ErrHoldLimit = errors.New("locking: hold limit")

	// ErrClosed is returned by calls on a closed Client, and is the end reason
	// of leases still held when it was closed.
	ErrClosed = quorum.ErrClosed

	// ErrInvalid marks bad arguments and options: an empty key, a ttl below
	// MinTTL, no masters, a nil client. Nothing was sent to Redis.
	ErrInvalid = errors.New("locking: invalid")

	// ErrEviction means a master's maxmemory-policy can evict keys (locks and
	// fencing counters) and the client was told to refuse such masters.
	ErrEviction = quorum.ErrEviction

	// ErrCorrupt means a lock's fencing counter on some master holds what no
	// fence can come from: not a decimal integer from 0 to 2^53-2 (text, a
	// fraction, a negative number, or one too large for the scripts' Lua
	// numbers, which are doubles). Acquisition fails, naming the master and
	// the key (a *CorruptError among the failures), instead of issuing a
	// fence that is negative or goes back; on a quorum one corrupt master is
	// enough, whatever the others grant. Waiting does not cure it (Lock
	// returns at once): an operator deletes the counter (see docs/locking.md).
	ErrCorrupt = quorum.ErrCorrupt
)

// CorruptError names a fencing counter that holds a corrupt value, the
// master it is on and what it holds. It wraps ErrCorrupt.
type CorruptError struct {
	Addr  string // the master's address, without credentials
	Key   string // the counter's key
	Value string // what it holds (its first 64 bytes)
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt: key %q on master %s holds %q, not an integer from 0 to 2^53-2", e.Key, e.Addr, e.Value)
}

// Unwrap lets errors.Is find ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// MasterError is one master's part in a failed operation.
type MasterError struct {
	Index int    // position in the list given to New
	Addr  string // the master's address, without credentials
	Err   error  // what went wrong there
}

func (e MasterError) Error() string {
	return fmt.Sprintf("master %d (%s): %v", e.Index, e.Addr, bare(e.Err))
}

func (e MasterError) Unwrap() error { return e.Err }

// errBusy is a master's answer that someone else holds the key.
var errBusy = errors.New("held by another client")

// ObtainError reports a failed acquisition: how many masters granted the lock,
// how many were needed, and what every other master answered.
// errors.Is(err, ErrNotObtained) holds when at least one master answered that
// the lock is taken; errors.Is(err, ErrUnavailable) holds when masters failed,
// were slow (a quorum granted the lock but its validity ran out on the way,
// or its fencing token could not be confirmed on a quorum), or were kept out
// of quorums after a restart. A Redis failure is never only "not obtained".
type ObtainError struct {
	Key      string
	Granted  int
	Quorum   int
	Expired  bool  // a quorum granted it, but the validity was used up on the way
	Fence    error // a quorum granted it, but no quorum confirmed the fencing token
	Failures []MasterError
}

// Error says what happened first: "locking: not obtained" when someone
// holds the lock, "locking: unavailable" when masters failed or were slow,
// both when both; then the key, the count of grants, and each master's part.
func (e *ObtainError) Error() string {
	var b strings.Builder
	busy, down := e.causes()
	switch {
	case e.corrupt():
		b.WriteString("locking: corrupt: key ")
	case busy && down:
		b.WriteString("locking: not obtained, unavailable: key ")
	case busy:
		b.WriteString("locking: not obtained: key ")
	default:
		b.WriteString("locking: unavailable: key ")
	}
	fmt.Fprintf(&b, "%q", e.Key)
	switch {
	case e.corrupt():
		if e.Fence != nil {
			fmt.Fprintf(&b, ": %v", e.Fence)
		}
	case e.Expired:
		fmt.Fprintf(&b, ": granted by %d of %d needed masters, but its validity ran out before the answers arrived", e.Granted, e.Quorum)
	case e.Fence != nil:
		fmt.Fprintf(&b, ": granted by %d masters, but %v", e.Granted, e.Fence)
	default:
		fmt.Fprintf(&b, ": granted by %d masters, %d needed", e.Granted, e.Quorum)
	}
	for _, f := range e.Failures {
		b.WriteString("; ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// causes tells whether some master answered that the lock is taken (busy)
// and whether masters failed, were slow or were kept out (down).
func (e *ObtainError) causes() (busy, down bool) {
	down = e.Expired || e.Fence != nil && !errors.Is(e.Fence, ErrCorrupt)
	for _, f := range e.Failures {
		switch {
		case errors.Is(f.Err, errBusy):
			busy = true
		case !errors.Is(f.Err, ErrCorrupt):
			down = true
		}
	}
	return busy, down
}

// corrupt reports whether some master answered that the lock's fencing
// counter is corrupt (see ErrCorrupt).
func (e *ObtainError) corrupt() bool {
	if errors.Is(e.Fence, ErrCorrupt) {
		return true
	}
	for _, f := range e.Failures {
		if errors.Is(f.Err, ErrCorrupt) {
			return true
		}
	}
	return false
}

// Unwrap lets errors.Is find ErrNotObtained (someone holds it, or the validity
// ran out), ErrUnavailable (masters failed), ErrCorrupt (a fencing counter
// is corrupt), each master's error and the fencing token's.
func (e *ObtainError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failures)+3)
	for _, f := range e.Failures {
		errs = append(errs, f)
	}
	if e.Fence != nil {
		errs = append(errs, e.Fence)
	}
	busy, down := e.causes()
	if busy {
		errs = append(errs, ErrNotObtained)
	}
	if down {
		errs = append(errs, ErrUnavailable)
	}
	return errs
}

// Held reports whether some master answered that another client holds the
// lock (as opposed to masters failing).
func (e *ObtainError) Held() bool {
	for _, f := range e.Failures {
		if errors.Is(f.Err, errBusy) {
			return true
		}
	}
	return false
}

// mayQueue reports whether the attempt may have registered its caller as a
// waiter somewhere: a master answered busy, or did not answer.
func (e *ObtainError) mayQueue() bool {
	for _, f := range e.Failures {
		if errors.Is(f.Err, errBusy) || isNetErr(f.Err) {
			return true
		}
	}
	return false
}

// contended reports whether waiting can help: someone holds the lock, or the
// masters that did not grant it are only temporarily out (quarantine, repair).
func (e *ObtainError) contended() bool {
	if e.corrupt() {
		return false
	}
	if e.Expired || e.Fence != nil {
		return true
	}
	for _, f := range e.Failures {
		if errors.Is(f.Err, errBusy) || errors.Is(f.Err, quorum.ErrRestarted) || errors.Is(f.Err, quorum.ErrQuarantine) {
			return true
		}
	}
	return false
}

// joinErrs joins the masters' errors on one line ("; "), keeping each one
// for errors.Is and errors.As (errors.Join would put each on its own line).
func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errList(errs)
}

type errList []error

func (e errList) Error() string {
	var b strings.Builder
	for i, err := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e errList) Unwrap() []error { return e }

// bare is err with its text's "locking: " prefix cut, for an error that
// wraps it after its own prefix ("locking: not held: lost: key ...").
// errors.Is and errors.As see err unchanged.
func bare(err error) error { return bareErr{err} }

type bareErr struct{ err error }

func (e bareErr) Error() string { return strings.TrimPrefix(e.err.Error(), "locking: ") }
func (e bareErr) Unwrap() error { return e.err }

// under wraps err in sentinel: "locking: not held: lost: ...".
func under(sentinel, err error) error { return fmt.Errorf("%w: %w", sentinel, bare(err)) }
