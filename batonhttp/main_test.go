package batonhttp_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redistest"
)

func TestMain(m *testing.M) {
	// exec jobs run under this binary as their supervisor, as in a program
	// that embeds baton and serves it
	baton.MaybeRunSupervisor()
	goleak.VerifyTestMain(m, redistest.GoleakOptions()...)
}
