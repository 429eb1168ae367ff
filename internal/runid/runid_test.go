package runid_test

import (
	"regexp"
	"testing"

	"github.com/batonhq/baton/internal/runid"
)

func TestFormat(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{32}$`)
	a, b := runid.New(), runid.New()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("run ids %q and %q: want two different 32-digit hex ids", a, b)
	}
}
