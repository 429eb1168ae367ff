package locking_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Each sentinel's text names it, so that a wrapped error reads as what
// happened.
func TestSentinelTextsNameThemselves(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{locking.ErrNotObtained, "locking: not obtained"},
		{locking.ErrUnavailable, "locking: unavailable"},
		{locking.ErrNotHeld, "locking: not held"},
		{locking.ErrLost, "locking: lost"},
		{locking.ErrReleased, "locking: released"},
		{locking.ErrHoldLimit, "locking: hold limit"},
		{locking.ErrClosed, "locking: client closed"},
		{locking.ErrInvalid, "locking: invalid"},
		{locking.ErrEviction, "locking: master may evict keys"},
		{locking.ErrCorrupt, "locking: corrupt"},
		{locking.ErrQuarantine, "locking: in its restart quarantine"},
		{locking.ErrMarked, "locking: not a brand-new set of masters"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("sentinel text %q, want %q", got, tc.want)
		}
	}
}

// A lease's errors after it ended, and a wait cut short, say what happened
// first, on one line, and keep errors.Is working through the wrapping.
func TestWrappedErrorsSayWhatHappened(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)

	// long enough to be obtained on a busy host (an answer that comes after
	// the validity is rightly refused), then waited out
	l, err := c.TryLock(ctx, "ended", time.Second, locking.WithAutoExtend(false))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	err = l.Release(ctx)
	if !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("release after the deadline = %v, want ErrNotHeld and ErrLost", err)
	}
	if want := `locking: not held: lost: key "ended": validity deadline passed`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("release after the deadline says %q, want it to start with %q", err, want)
	}

	held, err := c.TryLock(ctx, "busy", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Lock(wctx, "busy", time.Second)
	if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("Lock cut short = %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	var oe *locking.ObtainError
	if !errors.As(err, &oe) || oe.Key != "busy" {
		t.Fatalf("Lock cut short = %v, want the last attempt's *ObtainError", err)
	}
	if want := `locking: not obtained: the wait ended (context deadline exceeded); last attempt: not obtained: key "busy"`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Lock cut short says %q, want it to start with %q", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("Lock cut short says %q: more than one line", err)
	}
}
