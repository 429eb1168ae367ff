package chain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// An outcome recorded for a job others run after reads back as written,
// its reason bounded; a job nobody runs after records none; a record that
// is not one reads as a failure saying so.
func TestOutcomesReadBackAsRecorded(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, err := config.Load([]byte(`redis: {url: "redis://` + srv.Addr() + `/0"}
jobs:
  - {name: extract, schedule: "@hourly", exec: {command: ["true"]}}
  - {name: load, after: [extract], exec: {command: ["true"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 2000)
	if err := Record(ctx, rdb, cfg, "extract", at, Outcome{Status: jobs.StatusFailed, Reason: long}); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, rdb, cfg, "load", at, Outcome{Status: jobs.StatusOK}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(ctx, rdb, cfg.Namespace, []string{"extract", "load"}, at)
	if err != nil {
		t.Fatal(err)
	}
	if o := got["extract"]; o.Status != jobs.StatusFailed || len(o.Reason) != maxReason {
		t.Errorf("extract's outcome %q (%d bytes of reason)", o.Status, len(o.Reason))
	}
	if _, ok := got["load"]; ok {
		t.Errorf("load, which no job runs after, has an outcome record")
	}
	if ttl := rdb.PTTL(ctx, Key(cfg.Namespace, "extract", at)).Val(); ttl <= time.Hour {
		t.Errorf("the record lives %s, less than load waits for it", ttl)
	}
	rdb.Set(ctx, Key(cfg.Namespace, "extract", at), "done:run-1", 0)
	got, _ = Read(ctx, rdb, cfg.Namespace, []string{"extract"}, at)
	if o := got["extract"]; o.OK() || !strings.Contains(o.Reason, "an outcome record that is none") {
		t.Errorf("a record that is none reads as %+v", o)
	}
}
