package baton_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// baton.Init on a brand-new Redis: the masters vote at once (status shows
// none in quarantine), and a second Init refuses, naming the master.
func TestInitMarksBrandNewMastersOnceAndRefusesAfter(t *testing.T) {
	t.Parallel()
	srv, cfg := beatOnBrandNewRedis(t, "first", "@hourly")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := baton.Init(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Masters) != 1 || st.Masters[0].State != locking.MasterVoting || len(st.MastersAttention()) > 0 {
		t.Fatalf("after Init: masters %+v, attention %q; want voting", st.Masters, st.MastersAttention())
	}
	err = baton.Init(ctx, cfg)
	if !errors.Is(err, locking.ErrMarked) || !strings.Contains(err.Error(), "master 0 ("+srv.Addr()+")") {
		t.Fatalf("second Init: %v, want ErrMarked naming master 0", err)
	}
}

// Schedule: a deployment runs; its lock master restarts empty, and before
// any replica calls it (and so repairs it into its quarantine), an
// operator (or a start script) runs baton init. The master carries no
// marker, but replicas live in the roster: this is no brand-new set, and
// Init refuses, naming them, and marks nothing.
func TestInitRefusesWhileReplicasRun(t *testing.T) {
	t.Parallel()
	queue, master := redistest.New(t), redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {masters: ["redis://%s/0"]}
namespace: live
jobs:
  - name: beat
    schedule: "@hourly"
    exec: {command: ["true"]}
`, queue.Addr(), master.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := baton.New(cfg, baton.WithRole(baton.RoleWorker), baton.WithReplicaID("w1"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := master.Restart(); err != nil {
		t.Fatal(err)
	}
	err = baton.Init(ctx, cfg)
	if !errors.Is(err, locking.ErrMarked) || !strings.Contains(err.Error(), "w1") {
		t.Fatalf("Init with a live replica: %v, want ErrMarked naming replica w1", err)
	}
	if n, err := master.TestClient(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("the master holds %d keys after a refused Init (%v), want none", n, err)
	}
}
