package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// Schedule: a master's check hangs (its network swallows every packet) and
// holds the master for as long as its timeouts allow; meanwhile the
// scheduler, holding its held-ticks lock on the claim path, asks Known why
// ticks are held back. Known reports what was last found at once and never
// waits for the check.
func TestKnownDoesNotWaitForARunningCheck(t *testing.T) {
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 5 * time.Second, MaxRetries: -1})
	defer rdb.Close()
	g, err := New([]redis.UniversalClient{rdb}, Options{Marker: "m", Quarantine: time.Minute, Logger: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := g.Masters()[0]
	// found without a marker: repaired, then in its quarantine
	poll.Require(t, 30*time.Second, "the master found without a marker to enter its quarantine", func() bool {
		_, _ = m.Admit(ctx)
		return m.g.Known()[0].State == StateQuarantine
	})
	if err := p.Blackhole(); err != nil {
		t.Fatal(err)
	}
	m.Invalidate()
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		_, _ = m.Admit(context.WithoutCancel(ctx)) // hangs up to the check's timeout
	}()
	poll.Require(t, 10*time.Second, "the check to hold the master", func() bool {
		if m.mu.TryLock() {
			m.mu.Unlock()
			return false
		}
		return true
	})
	start := time.Now()
	st := g.Known()
	took := time.Since(start)
	<-checked
	if took > 500*time.Millisecond {
		t.Fatalf("Known waited %v for a check of an unresponsive master", took)
	}
	if st[0].State != StateQuarantine || st[0].Why != WhyNoMarker {
		t.Fatalf("Known = %+v, want the quarantine last found (%s)", st[0], WhyNoMarker)
	}
}
