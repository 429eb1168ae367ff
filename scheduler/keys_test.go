package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/keytable"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	k := newJobKeys("ns", "job")
	tick := k.tickKey(time.UnixMilli(1000))
	built := []string{tick, writerKey(tick), k.mark(), k.fence(), k.countedKey(2000), PauseKey("ns", "job"),
		(&Scheduler{opts: options{namespace: "ns"}}).membersKey()}
	keytable.Check(t, "../docs/operating.md", "scheduler", strings.NewReplacer("NS", "ns", "JOB", "job", "<mark ms>", "2000", "<ms>", "1000"), built)
}
