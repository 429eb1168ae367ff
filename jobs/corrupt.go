package jobs

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks a value read from Redis that is not what baton writes
// there: a run count toward max_runs that is no integer from 0 to 2^53-2
// (the dispatch fails), a history entry whose fields do not parse, a roster
// entry or job list that does not decode (the rest is read, and the error
// comes with it). A *CorruptError names the key and the field instead of
// reading it as zero or absent; an operator deletes or corrects what it
// names (a heartbeat deletes a roster entry without a seen time).
var ErrCorrupt = errors.New("jobs: corrupt value in Redis")

// CorruptError names a key (and, in a hash or a stream, the field or entry)
// whose value baton cannot read, what it holds and what it must hold. It
// wraps ErrCorrupt.
type CorruptError struct {
	Key   string
	Field string // the hash field or stream entry ID, "" for a whole key
	Value string // what it holds (its first 64 bytes)
	Want  string // what it must hold
}

func (e *CorruptError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("corrupt: key %q, %s, holds %q, not %s", e.Key, e.Field, e.Value, e.Want)
	}
	return fmt.Sprintf("corrupt: key %q holds %q, not %s", e.Key, e.Value, e.Want)
}

// Unwrap lets errors.Is find ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
