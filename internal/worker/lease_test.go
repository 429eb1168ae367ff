package worker

import (
	"encoding/json"
	"testing"

	"github.com/batonhq/baton/internal/formats"
)

// The holder record and the replace request carry their format versions.
func TestHolderRecordAndReplaceRequestCarryFormatVersion(t *testing.T) {
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
