package handoff

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/supervisor"
)

// TestMain runs the supervisor when a test started this binary as one, and
// checks that no test leaves goroutines behind.
func TestMain(m *testing.M) {
	supervisor.MaybeRun()
	goleak.VerifyTestMain(m, redistest.GoleakOptions()...)
}
