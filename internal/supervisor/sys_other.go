//go:build !linux

package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
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
