//go:build linux

package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// ChildProcAttr makes the kernel SIGKILL a child (redis-server, or another
// process a test starts) when its parent dies, so a crashed or killed test
// binary does not leak processes. (Pdeathsig fires
// when the OS thread that forked the child exits; the Go runtime almost never
// ends threads, so this is reliable in practice.)
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits, at most timeout, until the process shows as stopped in
// /proc, so that a SIGSTOP has taken effect when Pause returns.
func waitStopped(pid int, timeout time.Duration) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// Format: "pid (comm) S ...": the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			if st := b[i+2]; st == 'T' || st == 't' {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}
