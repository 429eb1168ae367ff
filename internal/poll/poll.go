// Package poll waits, in tests, for a condition that another goroutine or
// process brings about. It checks the condition every few milliseconds for
// at most a given time, so a test neither sleeps for a guessed time nor
// waits forever.
//
// [Until] reports whether the condition came to hold; [Require] fails the
// test, naming what it waited for and for how long, when it did not:
//
//	poll.Require(t, 10*time.Second, "a waiter on "+key, func() bool {
//		n, err := rdb.ZCard(ctx, waiters).Result()
//		return err == nil && n > 0
//	})
//
// The bound is the longest the condition may take, not a time the test
// waits: a condition that already holds returns at once. To wait out time
// that must pass (a lease's ttl running out in Redis), sleep, and say so.
package poll

import (
	"testing"
	"time"
)

// Interval is the time between two checks of a condition.
const Interval = 5 * time.Millisecond

// Until calls cond at once and then every [Interval] until it returns true
// or d has passed, and reports whether it returned true. cond is called one
// last time once d has passed, so a condition that comes to hold just at the
// deadline counts. A slow cond is not interrupted: d bounds the waiting
// between calls, not a call.
func Until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(Interval, left))
	}
}

// Require is [Until] that fails the test when cond has not held within d:
// it calls t.Fatalf with what (a phrase such as "the job to start") and the
// time it waited. Like t.Fatalf, it must be called from the goroutine
// running the test.
func Require(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	if !Until(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", time.Since(start).Round(time.Millisecond), what)
	}
}
