package handoff

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/keytable"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	tick := scheduler.Tick{Job: "job", At: worktest.TickBase}
	built := append(RunCountKeys("ns", "job"), bindingKey("ns", tick))
	built = append(built, JobRunCountKeys("ns", &config.Job{Name: "job", Created: time.UnixMilli(1700000000000)})...)
	keytable.Check(t, "../../docs/operating.md", "internal/handoff", strings.NewReplacer("NS", "ns", "JOB@TICK", tick.ID(), "JOB", "job", "CREATED", "1700000000000"), built)
}
