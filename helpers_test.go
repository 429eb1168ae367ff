package baton_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
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
