//go:build !linux

package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supported is false: without parent-death signals the supervisor cannot
// promise what it promises on Linux.
const supported = false

func supervisorAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Main exits with ExitFailure: the supervisor works on Linux only.
func Main() {
	fmt.Fprintf(os.Stderr, "baton supervisor: not supported on %s\n", runtime.GOOS)
	os.Exit(ExitFailure)
}

// monoNow reads CLOCK_MONOTONIC in nanoseconds (CLOCK_BOOTTIME, which counts
// a host's suspend, is Linux's).
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("supervisor: clock_gettime(CLOCK_MONOTONIC): %v", err))
	}
	return ts.Nano()
}

// killTree does nothing: descendants are tracked on Linux only.
func killTree(int, *orphans) {}

// waitExited returns at once: Wait reaps.
func waitExited(int) {}

// becomeSubreaperOnce does nothing: Start fails before it elsewhere.
func becomeSubreaperOnce() error { return nil }

func newMark() string { return "" }

const sweepTimeout = 0

// orphans tracks nothing: subreaping is Linux's.
type orphans struct{}

func newOrphans() *orphans                   { return &orphans{} }
func (*orphans) track(int, uint64)           {}
func (*orphans) keep(int, int)               {}
func (*orphans) sweep(string, time.Duration) {}

// stopProcess does nothing: Start fails before it elsewhere.
func stopProcess(*os.Process) error { return nil }
