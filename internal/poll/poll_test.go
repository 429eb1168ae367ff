package poll_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
)

// A condition that holds is checked once, and Until does not sleep.
func TestUntilHoldsAtOnce(t *testing.T) {
	calls := 0
	start := time.Now()
	if !poll.Until(time.Hour, func() bool { calls++; return true }) {
		t.Fatal("Until = false for a condition that holds")
	}
	if calls != 1 || time.Since(start) > poll.Interval {
		t.Fatalf("%d calls in %v, want 1 without a sleep", calls, time.Since(start))
	}
}

// A condition another goroutine brings about is seen soon after.
func TestUntilSeesAnotherGoroutine(t *testing.T) {
	var done atomic.Bool
	checked := make(chan struct{}) // closed at the first check
	var once sync.Once
	go func() {
		<-checked // the condition came to hold after Until first looked
		done.Store(true)
	}()
	cond := func() bool {
		v := done.Load() // false at the first check: the goroutine waits for it
		once.Do(func() { close(checked) })
		return v
	}
	if !poll.Until(10*time.Second, cond) {
		t.Fatal("Until = false although the condition came to hold")
	}
}

// A condition that never holds: Until returns false once d has passed,
// after a last check at the deadline, and not much later.
func TestUntilGivesUp(t *testing.T) {
	const d = 50 * time.Millisecond
	start := time.Now()
	var calls int
	var last time.Time
	ok := poll.Until(d, func() bool { calls, last = calls+1, time.Now(); return false })
	took := time.Since(start)
	if ok {
		t.Fatal("Until = true for a condition that never holds")
	}
	if last.Sub(start) < d {
		t.Errorf("last check %v after the start, before the deadline %v", last.Sub(start), d)
	}
	if took > d+time.Second {
		t.Errorf("Until took %v for a bound of %v", took, d)
	}
	if calls < 2 || calls > int(d/poll.Interval)+2 {
		t.Errorf("%d checks in %v at most every %v", calls, d, poll.Interval)
	}
}

// fatalT records what Require reports instead of ending the test.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

// Require says what it waited for and for how long, and nothing when the
// condition held.
func TestRequire(t *testing.T) {
	held := &fatalT{TB: t}
	poll.Require(held, time.Second, "the impossible", func() bool { return true })
	if held.msg != "" {
		t.Errorf("Require failed a condition that held: %q", held.msg)
	}
	missed := &fatalT{TB: t}
	poll.Require(missed, 20*time.Millisecond, "the impossible", func() bool { return false })
	var waited string
	if _, err := fmt.Sscanf(missed.msg, "timed out after %s waiting for the impossible", &waited); err != nil {
		t.Fatalf("Require reported %q, want the time waited and what", missed.msg)
	}
	if d, err := time.ParseDuration(waited); err != nil || d < 20*time.Millisecond {
		t.Errorf("Require reported waiting %q for a bound of 20ms", waited)
	}
}
