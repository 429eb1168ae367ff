package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/worktest"
)

// The holder record and the replace request carry their format versions.
func TestHolderRecordAndReplaceRequestCarryFormatVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{holderRecord{V: formats.HolderRecord, ID: "report@2026-11-28T12:00:00Z", Tick: "2026-11-28T12:00:00Z", RunID: "r1", Attempt: 1, Replica: "a"},
			`{"v":1,"id":"report@2026-11-28T12:00:00Z","tick":"2026-11-28T12:00:00Z","run_id":"r1","attempt":1,"replica":"a"}`},
		{cancelRequest{V: formats.CancelRequest, ID: "report@2026-11-28T12:00:00Z", Tick: "2026-11-28T12:00:00Z", Replica: "a"},
			`{"v":1,"id":"report@2026-11-28T12:00:00Z","tick":"2026-11-28T12:00:00Z","replica":"a"}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%T\n got %s\nwant %s", tc.v, b, tc.want)
		}
	}
}

// A holder record of a newer format than this release reads (a later
// release's run holds the job) is not read as this release's: the job
// counts as held by a run unknown. A retry of a tick that such a record
// seems to name is not taken for the same tick's earlier attempt (whose
// end it would wait for): under forbid it is skipped, the holder
// "unknown". The worker says so once, naming the format and both versions.
func TestHolderRecordOfANewerFormatCountsAsHeldByARunUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: sync
    schedule: "@every 1m"
    lock_ttl: 30s
    handler: {name: sync}
`)
	gate := make(chan struct{})
	defer close(gate)
	exec := newFakeExec(blockUntil(gate))
	logs := &worktest.Logs{}
	e.worker(t, cfg, exec, WithReplica("w1"), WithLogger(logs.Logger()))
	first, second := worktest.TickOf("sync", 1), worktest.TickOf("sync", 2)
	e.dispatch(t, cfg, first)
	worktest.Recv(t, exec.started, "the first run")
	newer := fmt.Sprintf(`{"v":%d,"id":%q,"tick":%q,"run_id":"r9","attempt":1,"replica":"later"}`,
		formats.HolderRecord+1, second.ID(), second.At.Format(time.RFC3339))
	if err := e.RDB.Set(context.Background(), holderKey("baton", "sync"), newer, 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	e.dispatch(t, cfg, second)
	e.State(t, "baton:default", second, asynq.TaskStateCompleted) // skipped, not waiting
	var skip map[string]any
	for _, l := range logs.All() {
		if l["msg"] == "skipped: another run holds the job" {
			skip = l
		}
	}
	if skip == nil || skip["holder"] != "unknown" {
		t.Fatalf("the second tick's skip: %v, want the holder unknown\n%s", skip, logs.String())
	}
	if n := logs.Count("holder record in a format newer than this replica reads: upgrade this replica"); n != 1 {
		t.Fatalf("%d lines about the newer record, want 1\n%s", n, logs.String())
	}
}

// A replace request of a newer format than this release reads stops no
// run: what it asks may mean something else (a replacing run of a later
// release waits for the lease instead).
func TestReplaceRequestOfANewerFormatStopsNoRun(t *testing.T) {
	t.Parallel()
	var e engine
	logs := &worktest.Logs{}
	e.log = logs.Logger()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e.register("a", &activeRun{at: worktest.TickOf("a", 1).At, cancel: cancel})
	req := fmt.Sprintf(`{"v":%d,"id":%q,"tick":%q,"replica":"later"}`, formats.CancelRequest+1,
		worktest.TickOf("a", 2).ID(), worktest.TickOf("a", 2).At.Format(time.RFC3339))
	e.onCancelRequest("a", req)
	e.onCancelRequest("a", req)
	if ctx.Err() != nil {
		t.Fatalf("the run was stopped: %v", context.Cause(ctx))
	}
	if n := logs.Count("replace request in a format newer than this replica reads: upgrade this replica"); n != 1 {
		t.Fatalf("%d lines about the newer request, want 1\n%s", n, logs.String())
	}
}
