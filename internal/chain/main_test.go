package chain

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/redistest"
)

// TestMain checks that no test leaves goroutines behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, redistest.GoleakOptions()...)
}
