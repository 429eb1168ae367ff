package formats

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
)

// NewerError is a value of a format newer than this release reads: a
// replica of a later release wrote it. The reader does not read it as a
// value of its own version (a later version may mean something else by
// the same members); it does the safe thing its format calls for (a pause
// flag keeps the job paused, a holder record leaves the job held, a roster
// entry counts its replica live with its job list unknown, a replace
// request is ignored, a history event makes the history unreadable rather
// than a tick look as if it had not run).
type NewerError struct {
	// Format names the format (Format.Name).
	Format string
	// Met is the version the value carries.
	Met int
	// Understood is the newest version this release reads.
	Understood int
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("formats: a %s of version %d, newer than this replica reads (%d): upgrade this replica", e.Format, e.Met, e.Understood)
}

// Check returns a *NewerError when version met of format (read from a
// value's "v"; 0 when absent, which is version 1) is newer than
// understood, the version this release writes; nil when this release
// reads it.
func Check(format string, understood, met int) error {
	if met <= understood {
		return nil
	}
	return &NewerError{Format: format, Met: met, Understood: understood}
}

// warned holds the formats whose NewerError this process has logged: one
// line per format per process, however many values of it a reader meets.
var warned sync.Map

// Forget has the next NewerError of format logged again by Warn: for a
// test that runs more than once in a process (go test -count=2) and
// expects its line.
func Forget(format string) { warned.Delete(format) }

// Warn logs err, a *NewerError a reader met, on log, the first time this
// process meets a value of that format newer than it reads, saying what
// the reader does instead (instead). Later ones are not logged. A nil log
// logs nothing (the caller reports err otherwise).
func Warn(log *slog.Logger, err *NewerError, instead string) {
	if log == nil {
		return
	}
	if _, logged := warned.LoadOrStore(err.Format, true); logged {
		return
	}
	log.Error("met a "+err.Format+" in a format newer than this replica reads: upgrade this replica (logged once per format)",
		slog.String("format", err.Format), slog.Int("version", err.Met), slog.Int("reads", err.Understood),
		slog.String("instead", instead))
}

// VersionOf reads the "v" member of a JSON object, alone: a value of a
// newer format is checked (Check) before its other members are decoded,
// which may not decode as this release's. 0 (version 1) when it has none,
// or when b is no JSON object with a number there (the caller's decoding
// then reports it).
func VersionOf(b []byte) int {
	var head struct {
		V int `json:"v"`
	}
	_ = json.Unmarshal(b, &head)
	return head.V
}
