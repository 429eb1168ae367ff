package locking

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/keytable"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds,
// and the lock key and fence builders agree with keysFor.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	c := &Client{opts: options{prefix: "pre:"}}
	k := c.keysFor("name")
	if lockKey("pre:", "name") != k.lock || fenceKey("pre:", "name") != k.fence {
		t.Errorf("lockKey, fenceKey %q, %q; keysFor %q, %q", lockKey("pre:", "name"), fenceKey("pre:", "name"), k.lock, k.fence)
	}
	built := []string{k.lock, k.fence, sharesKey("pre:", "name"), (&Election{keys: c.keysFor(electionLock("name"))}).leaderKey(),
		markerKey("pre:"), wakeChannelOf("pre:")}
	keytable.Check(t, "../docs/operating.md", "locking", strings.NewReplacer("PREFIX", "pre:", "NAME", "name"), built)
}
