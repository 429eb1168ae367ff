package formats

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A version up to the one understood reads (absent, 0, is version 1); a
// newer one is a *NewerError that tells the operator to upgrade, logged
// once per format per process.
func TestNewerVersionIsAnErrorLoggedOncePerFormat(t *testing.T) {
	for _, v := range []int{0, 1, 2} {
		if err := Check("test format a", 2, v); err != nil {
			t.Errorf("version %d of a format at 2: %v", v, err)
		}
	}
	err := Check("test format a", 2, 3)
	var ne *NewerError
	if !errors.As(err, &ne) || ne.Met != 3 || ne.Understood != 2 || !strings.Contains(err.Error(), "upgrade this replica") {
		t.Fatalf("version 3 of a format at 2: %v", err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for range 3 {
		Warn(log, ne, "kept paused")
	}
	Warn(log, &NewerError{Format: "test format b", Met: 5, Understood: 1}, "ignored")
	Warn(nil, ne, "no logger")
	out := buf.String()
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, `format="test format a" version=3 reads=2 instead="kept paused"`) ||
		!strings.Contains(out, `format="test format b" version=5 reads=1`) {
		t.Fatalf("logged:\n%s", out)
	}
}
