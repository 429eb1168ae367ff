package handoff

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/scheduler"
)

// A baton:run payload carries its format version first; a payload an older
// replica wrote (no "v") and one a newer replica wrote (a higher "v" with a
// member this one does not know) still read as the tick they name.
func TestTaskPayloadCarriesFormatVersion(t *testing.T) {
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Fence: 7, Replica: "a"}
	p := PayloadOf(tick)
	p.Namespace, p.Queue = "baton", "baton:default"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"ns":"baton","q":"baton:default"}`
	if string(b) != want {
		t.Fatalf("payload\n got %s\nwant %s\n(a change an older replica reads differently bumps formats.TaskPayload: see docs/operating.md)", b, want)
	}
	for _, old := range []string{
		`{"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"ns":"baton","q":"baton:default"}`,
		`{"v":2,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"later":"x"}`,
	} {
		got, err := ParsePayload([]byte(old))
		if err != nil || got.Job != tick.Job || !got.At.Equal(tick.At) || got.RunID != tick.RunID || got.Fence != tick.Fence {
			t.Errorf("%s: read as %+v, %v", old, got, err)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		n       int
		want    time.Duration
	}{
		{10 * time.Millisecond, 0, 10 * time.Millisecond},
		{10 * time.Millisecond, 1, 20 * time.Millisecond},
		{10 * time.Second, 3, 80 * time.Second},
		{10 * time.Second, 100, maxRetryDelay},
		{2 * time.Hour, 5, 2 * time.Hour},
		{0, 3, 0},
	} {
		if got := BackoffDelay(tc.backoff, tc.n); got != tc.want {
			t.Errorf("backoffDelay(%s, %d) = %s, want %s", tc.backoff, tc.n, got, tc.want)
		}
	}
}
