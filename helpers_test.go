package baton_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
)

// running builds a replica of cfg and runs it until the test ends (then it
// stops, and its Run must have returned without an error of its own).
func running(t *testing.T, cfg *config.Config, opts ...baton.Option) *baton.Replica {
	t.Helper()
	r, err := baton.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("replica %s: %v", r.ID(), err)
		}
	})
	return r
}

// serving serves r's HTTP handler until the test ends.
func serving(t *testing.T, r *baton.Replica) *httptest.Server {
	t.Helper()
	h := baton.NewHTTPHandler(r)
	web := httptest.NewServer(h)
	t.Cleanup(func() { web.Close(); h.Close() })
	return web
}

// beatOnBrandNewRedis starts a brand-new redis-server (no marker: its first
// user finds it in its restart quarantine) and loads a config using it as
// queue and lock master under namespace ns, with one exec job "beat" on
// schedule.
func beatOnBrandNewRedis(t *testing.T, ns, schedule string) (*redistest.Server, *config.Config) {
	t.Helper()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
namespace: %s
jobs:
  - name: beat
    schedule: %q
    exec: {command: ["true"]}
`, srv.Addr(), ns, schedule))
	if err != nil {
		t.Fatal(err)
	}
	return srv, cfg
}
