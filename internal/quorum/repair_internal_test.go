package quorum

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// Schedule: A restarted and is being repaired; between the repair's read of
// the masters and its marking, source B restarts too. The round must not
// finish on that view: it is run again, and A and B both end up repaired
// with floors above every fence issued before.
func TestRepairRecheckedWhenSourceRestarts(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []redis.UniversalClient
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	// not fresh: a restart soon after a fresh marking counts as part of it
	g, err := New(rdbs, Options{Marker: "m", Quarantine: time.Second, Logger: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range g.Masters() {
		for _, err := m.Admit(ctx); err != nil; _, err = m.Admit(ctx) {
			if ctx.Err() != nil {
				t.Fatalf("new master %d: %v", m.Idx, err)
			}
			time.Sleep(50 * time.Millisecond) // real time: a new server waits out its first second by Redis's clock
		}
	}
	before := time.Now().UnixMicro()
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	var rounds, restarted atomic.Int32
	g.testHook = func(point string, m *Master) {
		if m.Idx != 0 {
			return
		}
		if point == "round" {
			rounds.Add(1)
		}
		if point == "probed" && restarted.Add(1) == 1 {
			if err := servers[1].Restart(); err != nil {
				t.Error(err)
			}
		}
	}
	a := g.Masters()[0]
	a.mu.Lock()
	old := a.runID
	a.mu.Unlock()
	repaired := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.runID != old && (a.state == stVoting || a.state == stQuarantine)
	}
	ping := NewScript("return 1")
	rawB := servers[1].TestClient(t)
	poll.Require(t, 30*time.Second, "A and B repaired", func() bool {
		if repaired() && rawB.Exists(ctx, "m").Val() != 0 {
			return true
		}
		g.Pipeline(ctx, time.Second, ping, 1, func(int) ([]string, []any) { return []string{"k"}, nil })
		return false
	})
	if rounds.Load() < 2 {
		t.Fatalf("the repair finished in %d round(s) although B restarted during it", rounds.Load())
	}
	for i, s := range servers[:2] {
		v, err := s.TestClient(t).Get(ctx, "m").Result()
		if err != nil {
			t.Fatalf("master %d has no marker: %v", i, err)
		}
		mk, ok := parseMarker(v)
		if !ok || mk.floor <= before {
			t.Fatalf("master %d marker %q: floor not above %d", i, v, before)
		}
		if mk.fresh {
			t.Fatalf("master %d marked fresh after a restart", i)
		}
	}
}

func TestVersionCheck(t *testing.T) {
	for v, ok := range map[string]bool{"6.2.0": true, "7.0.15": true, "6.0.9": false, "5.0.7": false, "10.0": true, "6": false} {
		if atLeast(v, 6, 2) != ok {
			t.Errorf("atLeast(%q, 6, 2) = %v", v, !ok)
		}
	}
}

type tlog struct{ t *testing.T }

func (l tlog) Printf(f string, v ...any) { l.t.Logf(f, v...) }

// The repair's log lines count masters in words a reader expects: "1
// master", "3 masters".
func TestMastersCountReadsAsEnglish(t *testing.T) {
	for n, want := range map[int]string{1: "1 master", 3: "3 masters", 0: "0 masters"} {
		if got := masters(n); got != want {
			t.Errorf("masters(%d) = %q, want %q", n, got, want)
		}
	}
}
