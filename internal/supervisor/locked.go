package supervisor

import (
	"os/exec"
	"runtime"
)

// StartLocked starts cmd from a goroutine locked to its OS thread and keeps
// that thread until wait returns. A parent-death signal (Pdeathsig) fires
// when the thread that forked the child ends, not the process: the thread
// must neither end nor serve other goroutines while the child runs, so wait
// must return only once the child is gone. StartLocked returns cmd.Start's
// error; wait runs only when the start succeeded.
func StartLocked(cmd *exec.Cmd, wait func()) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		wait()
	}()
	return <-started
}
