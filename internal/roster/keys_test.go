package roster

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/worktest"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	doc := worktest.KeyTable(t, "internal/roster", strings.NewReplacer("NS", "ns"))
	worktest.SameKeys(t, Keys("ns"), doc)
}
