package jobs

import (
	"encoding/json"
	"testing"

	"github.com/batonhq/baton/internal/formats"
)

// A roster entry carries its format version beside the member's fields, and
// reads back as the member (an older replica reads it alike: it ignores "v").
func TestRosterEntryCarriesFormatVersion(t *testing.T) {
	m := Member{ID: "a", Version: "v1.2.3", Role: "run", Queues: []string{"baton:default"}, Hash: "0123456789ab", SkewMS: -3}
	b, err := json.Marshal(rosterEntry{V: formats.RosterEntry, Member: m})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"version":"v1.2.3","role":"run","queues":["baton:default"],"hash":"0123456789ab","skew_ms":-3}`
	if string(b) != want {
		t.Fatalf("entry\n got %s\nwant %s", b, want)
	}
	var back Member
	if err := json.Unmarshal(b, &back); err != nil || back.Version != m.Version || back.Hash != m.Hash || back.SkewMS != m.SkewMS {
		t.Fatalf("read back as %+v, %v", back, err)
	}
}
