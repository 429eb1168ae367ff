package schedstore

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/keytable"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	keytable.Check(t, "../../docs/operating.md", "internal/schedstore", strings.NewReplacer("NS", "ns"), append(Keys("ns", 1), marksKey("ns"), signedKey("ns")))
}
