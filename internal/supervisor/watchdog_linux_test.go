package supervisor

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// Instants of these tests, in ns on the watchdog's clock.
const (
	sec    = int64(time.Second)
	tGrace = 5 * sec
	tMrgn  = sec
)

func termDue(deadline bool) signalDue { return signalDue{syscall.SIGTERM, deadline} }
func killDue(deadline bool) signalDue { return signalDue{syscall.SIGKILL, deadline} }

// wantDue checks what w has due at now.
func wantDue(t *testing.T, w *watchdog, now int64, want ...signalDue) {
	t.Helper()
	if got := w.due(now); !slices.Equal(got, want) {
		t.Fatalf("due at %v: %v, want %v", time.Duration(now), got, want)
	}
}

func TestWatchdogTermsAGraceBeforeTheKillAndKillsAMarginBeforeTheDeadline(t *testing.T) {
	w := newWatchdog(100*sec, tGrace, tMrgn, 0)
	if got, want := w.next(), 100*sec-tMrgn-tGrace; got != want {
		t.Fatalf("next = %v, want %v", time.Duration(got), time.Duration(want))
	}
	wantDue(t, w, 94*sec-1)
	wantDue(t, w, 94*sec, termDue(true))
	if got, want := w.next(), 99*sec; got != want {
		t.Fatalf("next after SIGTERM = %v, want %v", time.Duration(got), time.Duration(want))
	}
	wantDue(t, w, 99*sec-1)
	wantDue(t, w, 99*sec, killDue(false)) // the deadline fired once: reported once
	if !w.hit {
		t.Fatal("hit = false after the deadline's signals")
	}
	if got := w.next(); got != never {
		t.Fatalf("next after both signals = %v, want never", time.Duration(got))
	}
	wantDue(t, w, 200*sec) // each signal once
}

func TestWatchdogLateAtOnceSendsBothSignalsInOrder(t *testing.T) {
	w := newWatchdog(100*sec, tGrace, tMrgn, 0)
	wantDue(t, w, 150*sec, termDue(true), killDue(false))
}

func TestWatchdogShortLeaseTermsAtHalfTheTimeLeft(t *testing.T) {
	// 4s left before the kill, less than twice the grace: SIGTERM at 2s
	w := newWatchdog(5*sec, tGrace, tMrgn, 0)
	if got, want := w.next(), 2*sec; got != want {
		t.Fatalf("next = %v, want %v", time.Duration(got), time.Duration(want))
	}
	// already past the kill instant: no grace at all
	w = newWatchdog(5*sec, tGrace, tMrgn, 10*sec)
	wantDue(t, w, 10*sec, termDue(true), killDue(false))
}

func TestWatchdogExtendPostponesBothSignals(t *testing.T) {
	w := newWatchdog(100*sec, tGrace, tMrgn, 0)
	w.extend(200*sec, 50*sec)
	wantDue(t, w, 94*sec)
	wantDue(t, w, 99*sec)
	wantDue(t, w, 194*sec, termDue(true))
	wantDue(t, w, 199*sec, killDue(false))
}

func TestWatchdogExtendDoesNotTakeBackASentSignal(t *testing.T) {
	w := newWatchdog(100*sec, tGrace, tMrgn, 0)
	wantDue(t, w, 95*sec, termDue(true))
	w.extend(200*sec, 95*sec)
	wantDue(t, w, 194*sec) // SIGTERM went already
	wantDue(t, w, 199*sec, killDue(false))
}

func TestWatchdogWithoutDeadlineSignalsNothing(t *testing.T) {
	w := newWatchdog(0, tGrace, tMrgn, 0)
	if got := w.next(); got != never {
		t.Fatalf("next = %v, want never", time.Duration(got))
	}
	wantDue(t, w, 1000*sec)
	// a deadline set later, then taken away again
	w.extend(2000*sec, 1000*sec)
	w.extend(0, 1000*sec)
	wantDue(t, w, 3000*sec)
}

func TestWatchdogStopTermsNowAndKillsAfterItsGraceUnreported(t *testing.T) {
	w := newWatchdog(0, tGrace, tMrgn, 0)
	w.stop(10*sec, 2*sec)
	if got, want := w.next(), 10*sec; got != want {
		t.Fatalf("next = %v, want %v", time.Duration(got), time.Duration(want))
	}
	wantDue(t, w, 10*sec, termDue(false))
	wantDue(t, w, 12*sec-1)
	wantDue(t, w, 12*sec, killDue(false))
	if w.hit {
		t.Fatal("hit = true after a stop: the deadline did not fire")
	}
}

func TestWatchdogStopNeverPostponesASignal(t *testing.T) {
	w := newWatchdog(100*sec, tGrace, tMrgn, 0)
	w.stop(90*sec, 10*sec) // a stop's kill at 100s: the deadline's at 99s stays
	wantDue(t, w, 90*sec, termDue(false))
	wantDue(t, w, 99*sec, killDue(true)) // the deadline's kill: reported
	w = newWatchdog(0, tGrace, tMrgn, 0)
	w.stop(10*sec, 1*sec)
	w.stop(20*sec, 0) // a second stop, later: the first's instants stay
	wantDue(t, w, 10*sec, termDue(false))
	wantDue(t, w, 11*sec, killDue(false))
}
