package worker

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/keytable"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	t.Parallel()
	tick := scheduler.Tick{Job: "job", At: worktest.TickBase}
	built := append([]string{tickRecordKey("ns", tick), holderKey("ns", "job"), cancelChannel("ns", "job"), asynqCancelRedirect("ns")},
		bufferKeys("ns", "job")[0], slotHolderKey("ns", "limit", 0))
	keytable.Check(t, "../../docs/operating.md", "internal/worker", strings.NewReplacer("NS", "ns", "JOB", "job", "<tick ID>", tick.ID(), "LIMIT", "limit", "<i>", "0"), built)
}
