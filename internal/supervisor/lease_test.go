//go:build linux

package supervisor_test

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/supervisor"
)

// extendedWhileStarting is a lease whose deadline, as first read, is about
// to pass, and which is extended right after: the supervisor, slow to start
// on a busy host, is handed a deadline the lease has already moved past.
type extendedWhileStarting struct {
	reads    atomic.Int32
	extended time.Time
}

func (v *extendedWhileStarting) Deadline() time.Time {
	if v.reads.Add(1) == 1 {
		return time.Now().Add(time.Millisecond)
	}
	return v.extended
}

func (v *extendedWhileStarting) Done() <-chan struct{} { return nil }

// A lease extended while the supervisor starts: the child starts under the
// extended deadline, not refused for the deadline first handed.
func TestStartUnderALeaseExtendedWhileStarting(t *testing.T) {
	v := &extendedWhileStarting{extended: time.Now().Add(time.Minute)}
	var out strings.Builder
	p, deadline, err := supervisor.StartUnder(testCtx(t), v, supervisor.Spec{Path: os.Args[0], Args: []string{"echo", "ran"}, Stdout: &out, Quiet: true})
	if err != nil {
		t.Fatalf("StartUnder: %v; want the command started under the extended lease", err)
	}
	if code, err := p.Wait(); code != 0 || err != nil || out.String() != "ran\n" {
		t.Errorf("command: exit %d, %v, output %q", code, err, out.String())
	}
	if !deadline.Equal(v.extended) {
		t.Errorf("started under %v, want the extended deadline %v", deadline, v.extended)
	}
}

// aheadLease is a lease extended without pause: read at any moment, its
// deadline is ttl ahead.
type aheadLease struct{ ttl time.Duration }

func (l aheadLease) Deadline() time.Time   { return time.Now().Add(l.ttl) }
func (l aheadLease) Done() <-chan struct{} { return nil }

// A lease whose time left never lets the supervisor start (here shorter
// than its kill margin; on a host where a start takes longer than the ttl,
// the same), although it is extended all along, is not started under again
// and again for as long as it is held: StartUnder gives up after
// MaxLeaseStarts starts, saying so.
func TestStartUnderGivesUpOnALeaseTooShort(t *testing.T) {
	_, _, err := supervisor.StartUnder(testCtx(t), aheadLease{ttl: 40 * time.Millisecond}, supervisor.Spec{Path: os.Args[0], Args: []string{"echo", "ran"}})
	if !errors.Is(err, supervisor.ErrLeaseTooShort) || !errors.Is(err, supervisor.ErrDeadline) || !strings.Contains(err.Error(), "3 starts") {
		t.Fatalf("StartUnder: %v; want ErrLeaseTooShort after 3 starts", err)
	}
}
