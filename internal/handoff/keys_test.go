package handoff

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	tick := scheduler.Tick{Job: "job", At: worktest.TickBase}
	built := append(RunCountKeys("ns", "job"), bindingKey("ns", tick))
	doc := worktest.KeyTable(t, "internal/handoff", strings.NewReplacer("NS", "ns", "JOB@TICK", tick.ID(), "JOB", "job"))
	worktest.SameKeys(t, built, doc)
}
