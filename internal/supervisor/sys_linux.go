package supervisor

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const supported = true

// supervisorAttr puts the supervisor in a process group of its own (a
// signal to baton's group, ^C or ^Z on a terminal, does not reach it; baton
// decides what its runs do) and has the kernel send it SIGTERM when the
// thread that started it ends.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// monoNow reads CLOCK_BOOTTIME in nanoseconds: a monotonic clock that, unlike
// CLOCK_MONOTONIC (the Go runtime's), keeps counting while the host is
// suspended, as Redis expiries do. (The name stays: it is the supervisor's
// one monotonic clock.)
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("supervisor: clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return ts.Nano()
}

// stopProcess stops p with SIGSTOP: it runs no more until killed.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
