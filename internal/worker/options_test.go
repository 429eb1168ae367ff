package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
)

// WithReplicaInfo documents its defaults as "dev" and "worker" ("scheduler"
// with WithLocalOnly). An empty version or role given to it keeps those
// defaults, as it always did (they were filled in after the options): the
// roster a replica publishes says so.
func TestEmptyReplicaInfoKeepsDefaults(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, err := config.Load([]byte(fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nnamespace: rvinfo\njobs:\n  - name: j\n    schedule: \"@every 1m\"\n    exec: {command: [\"true\"]}\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	w := New(cfg, asynq.RedisClientOpt{Addr: srv.Addr()}, nil, nil,
		WithReplica("rv-a"), WithReplicaInfo("", ""), WithLocalOnly())
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	ms, err := roster.Read(context.Background(), rdb, "rvinfo")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("roster %+v, want one member", ms)
	}
	if ms[0].Version != "dev" || ms[0].Role != "scheduler" {
		t.Errorf("roster shows version %q role %q, want \"dev\" and \"scheduler\" (the documented defaults)", ms[0].Version, ms[0].Role)
	}
}

// A worker's options keep their defaults: replica id host-pid, version
// "dev", role "worker" ("scheduler" when local only), poll intervals 100ms
// and 1s, a non-nil (discarding) logger also when WithLogger(nil) is
// given, and the real clock also when WithClock(nil) is given.
func TestOptionDefaults(t *testing.T) {
	t.Parallel()
	o := newOptions([]Option{WithLogger(nil), WithClock(nil), WithPollIntervals(0, 0), WithReplicaInfo("v9", "")})
	if o.log == nil || o.clock == nil {
		t.Fatalf("nil logger %v or clock %v", o.log == nil, o.clock == nil)
	}
	if o.taskCheck != 100*time.Millisecond || o.delayedCheck != time.Second {
		t.Errorf("poll intervals %v %v", o.taskCheck, o.delayedCheck)
	}
	if o.role != "worker" || o.version != "v9" || o.replica == "" {
		t.Errorf("role %q version %q replica %q", o.role, o.version, o.replica)
	}
	if l := newOptions([]Option{WithLocalOnly()}); l.role != "scheduler" {
		t.Errorf("local-only role %q", l.role)
	}
}
