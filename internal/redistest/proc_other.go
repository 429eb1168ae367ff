//go:build !linux

package redistest

import (
	"syscall"
	"time"
)

// ChildProcAttr returns no special attributes: parent-death signals are
// Linux-only.
func ChildProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// waitStopped gives a SIGSTOP a moment to take effect; there is no portable
// way to observe the stopped state.
func waitStopped(_ int, _ time.Duration) { time.Sleep(10 * time.Millisecond) }
