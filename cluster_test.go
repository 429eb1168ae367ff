package baton_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// On a brand-new Redis that a replica uses without baton init, Status shows
// the master in its restart quarantine: why (no marker) and until when, and
// its attention line says how a brand-new set skips the wait.
func TestStatusShowsMasterInQuarantineWithWhyAndUntil(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
namespace: seen
jobs:
  - name: beat
    schedule: "@every 1s"
    exec: {command: ["true"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	running(t, cfg)
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st *baton.Status
	poll.Require(t, 20*time.Second, "the master in quarantine", func() bool {
		st, _ = c.Status(ctx)
		return st != nil && len(st.Masters) == 1 && st.Masters[0].State == locking.MasterQuarantine
	})
	m := st.Masters[0]
	if m.Why != locking.WhyNoMarker || m.Until.Sub(st.Time) < 30*time.Second || m.Until.Sub(st.Time) > time.Minute+time.Second {
		t.Errorf("master %+v: want why %q, until about a minute after %v", m, locking.WhyNoMarker, st.Time)
	}
	att := st.MastersAttention()
	if len(att) != 1 || !strings.Contains(att[0], "lock master 0 ("+srv.Addr()+") in its restart quarantine until ") ||
		!strings.Contains(att[0], locking.WhyNoMarker) || !strings.Contains(att[0], "baton init") {
		t.Errorf("attention %q: want master 0 in quarantine, why, and baton init", att)
	}
}
