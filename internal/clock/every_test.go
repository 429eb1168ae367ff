package clock

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every replaced time.NewTicker for heartbeats, holder-record refreshes and
// replace-request republishing: the first call comes d after the start (not
// at once), then every d, and it returns when done closes, calling nothing
// more.
func TestEveryTicksLikeATicker(t *testing.T) {
	clk := NewFake(time.Unix(1700000000, 0))
	done := make(chan struct{})
	var calls atomic.Int64
	called := make(chan struct{}, 10)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Every(done, clk, time.Second, func() { calls.Add(1); called <- struct{}{} })
	}()
	if err := clk.BlockUntil(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // real time: a window in which a call that must not come would show
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls before any time passed, want 0", n)
	}
	clk.Advance(999 * time.Millisecond)
	time.Sleep(20 * time.Millisecond) // real time: a window in which a call that must not come would show
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls after 999ms of a 1s period, want 0", n)
	}
	clk.Advance(time.Millisecond)
	<-called
	for i := 2; i <= 3; i++ {
		if err := clk.BlockUntil(1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		<-called
		if n := calls.Load(); n != int64(i) {
			t.Fatalf("%d calls after %ds, want %d", n, i, i)
		}
	}
	close(done)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("every did not return after done closed")
	}
	clk.Advance(10 * time.Second)
	time.Sleep(20 * time.Millisecond) // real time: a window in which a call after done would show
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls after done closed, want 3", n)
	}
}
