package chain

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/keytable"
)

// The key table in docs/operating.md lists the keys this package builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	at := time.UnixMilli(1000)
	keytable.Check(t, "../../docs/operating.md", "internal/chain", strings.NewReplacer("NS", "ns", "JOB", "job", "<tick ms>", "1000"), []string{Key("ns", "job", at)})
}
