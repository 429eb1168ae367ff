package runlog

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/keytable"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	built := []string{Key("ns", "job"), ListKey("ns", "job"), onceKey("ns", "job", "missed", 1000)}
	keytable.Check(t, "../../docs/operating.md", "internal/runlog", strings.NewReplacer("NS", "ns", "JOB", "job", "<status>", "missed", "<ms>", "1000"), built)
}
