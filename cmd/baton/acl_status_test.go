package main

// ACL paths the documented-ACL test does not reach.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/redistest"
)

// `baton status` reads an orphan queue's size under the documented ACL.
func TestStatusOrphanQueueUnderTheDocumentedACL(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	admin := srv.TestClient(t)
	ctx := context.Background()
	const pass = "acl-pw-r9"
	args := documentedACL(t, "prod", pass)
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer c.Close()
	if _, err := c.Enqueue(asynq.NewTask("baton:run", []byte(`{}`)), asynq.Queue("prod:old")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf("redis:\n  url: redis://baton:%s@%s/0\nnamespace: prod\nlocking:\n  fresh_deployment: true\njobs:\n  - name: a\n    schedule: '@hourly'\n    exec: {command: [\"true\"]}\n", pass, srv.Addr())); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, `queue "prod:old" holds 1 pending`) {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	entries, _ := admin.Do(ctx, "ACL", "LOG", "128").Slice()
	for _, e := range entries {
		if s := fmt.Sprint(e); !strings.Contains(s, "config|get") {
			t.Errorf("Redis denied baton status: %v", s)
		}
	}
}
