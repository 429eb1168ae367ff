package supervisor

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The supervisor's two pipes, as file descriptors in the supervisor (the
// first two of exec.Cmd.ExtraFiles).
const (
	ctlFD    = 3 // parent -> supervisor: request, then deadline and stop lines
	statusFD = 4 // supervisor -> parent: pid, start error, deadline fired
)

// request is the first line on the control pipe, JSON-encoded. Later lines
// are "d <mono ns>" (a new deadline, 0 for none), "s <grace ns>" (stop) and
// "k <signal>" (send the signal to the child's process group).
//
// The status pipe carries "pid <n> <start>" once the child runs (start: the
// child's start time in clock ticks after boot, from /proc/<n>/stat, read
// before the child can have been reaped), or "err <kind>
// <message>" if it could not start (kind: notfound, perm, other), and
// "deadline" when a deadline timer fires (or, instead of "pid", when the
// deadline had passed before the child could start).
type request struct {
	Argv     []string `json:"argv"`
	Grace    int64    `json:"grace"`    // ns
	Margin   int64    `json:"margin"`   // ns
	Deadline int64    `json:"deadline"` // CLOCK_BOOTTIME ns; 0: none
	Quiet    bool     `json:"quiet"`    // no line of its own on stderr
	Mark     string   `json:"mark"`     // value of TreeEnv in the child's environment
	Cgroup   string   `json:"cgroup"`   // the run's cgroup v2 directory, "" for none
}

func (r request) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Status line kinds of a start error.
const (
	errKindNotFound = "notfound"
	errKindPerm     = "perm"
	errKindOther    = "other"
)

// toMono converts a deadline to CLOCK_BOOTTIME nanoseconds; the zero time
// is 0 (no deadline). time.Until uses t's monotonic reading when it has one.
func toMono(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	m := monoNow() + int64(time.Until(t))
	if m <= 0 {
		m = 1 // long past, but not "none"
	}
	return m
}

// parseLine splits a control or status line into its verb and the integer
// that follows it (if any).
func parseLine(line string) (verb string, n int64, err error) {
	verb, rest, _ := strings.Cut(line, " ")
	if rest == "" {
		return verb, 0, nil
	}
	n, err = strconv.ParseInt(rest, 10, 64)
	return verb, n, err
}
