package quorum

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrCorrupt marks a value in Redis that baton cannot read as what it must
// be: a fencing counter or a tick mark that is not a decimal integer from 0
// to 2^53 - 2 (Lua numbers are doubles: 2^63 - 1 would turn into a negative
// fence, and above 2^53 the next fence would equal the last). Nothing is
// granted on it: an operator must repair the key (see docs/locking.md).
var ErrCorrupt = errors.New("locking: corrupt")

// MaxCounter is the largest value a counter may hold (2^53 - 2): one more,
// the next fence, is still exact in a Lua number.
const MaxCounter = 1<<53 - 2

// CorruptError names a counter that holds something else than an integer
// from 0 to MaxCounter, or a record that holds none of the values its
// scripts write, and the master it is on. It wraps ErrCorrupt.
type CorruptError struct {
	Addr  string // the master's address, without credentials
	Key   string
	Value string // what the key holds (its first 64 bytes)
	Want  string // what it should hold; empty: a counter
}

func (e *CorruptError) Error() string {
	want := e.Want
	if want == "" {
		want = "an integer from 0 to 2^53-2"
	}
	return fmt.Sprintf("corrupt: key %q on master %s holds %q, not %s", e.Key, e.Addr, e.Value, want)
}

// What a tick key and its writer key may hold: the error replies
// "CORRUPTREC i VALUE" and "CORRUPTBY i VALUE" of a script that read
// something else there.
const (
	wantRecord = `a tick record ("done", "missed" or "paused") or a claim token (hex)`
	wantWriter = `"<claim token>:<fence>" with a fence from 1 to 2^53-1`
)

// Unwrap lets errors.Is find ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// ParseCounter reads a counter's text as the scripts' q_int does (see
// lua/prelude.lua): a decimal integer from 0 to MaxCounter, without sign or
// leading zeros. ok is false for anything else.
func ParseCounter(s string) (n int64, ok bool) {
	if s == "" || len(s) > 16 || (s[0] == '0' && s != "0") {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n <= MaxCounter
}

// corrupt turns a script's "CORRUPT i VALUE" error reply (see q_count in
// lua/prelude.lua), or "CORRUPTREC i VALUE" / "CORRUPTBY i VALUE" for a
// tick record / its writer, into a
// *CorruptError naming the master and KEYS[i] of the command line; other
// answers are left as they are.
func (m *Master) corrupt(cmd *redis.Cmd, line []any) {
	err := cmd.Err()
	if err == nil || !redis.HasErrorPrefix(err, "CORRUPT") {
		return
	}
	kind, rest, _ := strings.Cut(err.Error(), " ")
	want := ""
	switch kind {
	case "CORRUPT":
	case "CORRUPTREC":
		want = wantRecord
	case "CORRUPTBY":
		want = wantWriter
	default:
		return
	}
	idx, val, _ := strings.Cut(rest, " ")
	i, aerr := strconv.Atoi(idx)
	nkeys, _ := line[2].(int)
	if aerr != nil || i < 1 || i > nkeys {
		return
	}
	key, _ := line[2+i].(string)
	cmd.SetErr(&CorruptError{Addr: m.Addr, Key: key, Value: val, Want: want})
}
