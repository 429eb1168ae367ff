package supervisor

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The process that starts supervisors (baton) is a child subreaper too. A
// job that kills its own supervisor (SIGKILL, which nothing catches) takes
// the supervisor's subreaping with it: the supervisor's children, and later
// their orphans, are reparented to the nearest living subreaper above, this
// process, instead of to init. Once a supervisor has exited, Start's waiter
// sweeps them (orphans.sweep): it kills every child of this process that
// carries the run's TreeEnv mark in its environment, with its whole
// subtree (stopped first, in rounds, as killTree does), and reaps them.
//
// Reaping here must never take the exit status of a child that another
// part of the program waits for (an exec.Cmd of its own). So this process
// reaps only through pidfds of processes it knows to be the run's: the
// child the supervisor reported (pid and start time), the processes
// killTree signalled below a supervisor, and the marked processes the
// sweep found. waitid(P_PIDFD) reaps exactly that process or nothing.

// becomeSubreaperOnce makes this process a child subreaper the first time
// Start runs.
var becomeSubreaperOnce = sync.OnceValue(becomeSubreaper)

// newMark returns a run's TreeEnv value: 16 random bytes in hex.
func newMark() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b)
}

// sweepTimeout bounds the sweep after a supervisor exited.
const sweepTimeout = 2 * time.Second

// orphans holds pidfds of processes of one run that are, or may become,
// children of this process.
type orphans struct {
	mu  sync.Mutex
	fds map[int]int // pid -> pidfd
}

func newOrphans() *orphans { return &orphans{fds: map[int]int{}} }

// keep takes fd, a pidfd of pid (a process of the run).
func (o *orphans) keep(pid, fd int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.fds[pid]; ok {
		_ = unix.Close(old)
	}
	o.fds[pid] = fd
}

// track keeps a pidfd of pid if it is the process that started at start.
func (o *orphans) track(pid int, start uint64) {
	if fd, ok := openPidfd(pid, start); ok {
		o.keep(pid, fd)
	}
}

// sweep kills and reaps the run's processes that outlived its supervisor,
// for at most d, and then closes every pidfd it holds. mark is the run's
// TreeEnv value.
func (o *orphans) sweep(mark string, d time.Duration) {
	needle := []byte("\x00" + TreeEnv + "=" + mark + "\x00")
	end := time.Now().Add(d)
	for {
		// reap first: once every process kept is gone, its children have
		// been reparented, and the scan that follows sees them
		pending := o.reap()
		found := o.killMarked(needle)
		if pending == 0 && found == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for pid, fd := range o.fds {
		_ = unix.Close(fd)
		delete(o.fds, pid)
	}
}

// killMarked kills every live child of this process whose environment holds
// needle, and the processes below it, and keeps their pidfds. It returns
// how many such children it found.
func (o *orphans) killMarked(needle []byte) int {
	self := os.Getpid()
	n := 0
	for pid, p := range scan() {
		if p.ppid != self || p.zombie || !environHas(pid, needle) {
			continue
		}
		fd, ok := openPidfd(pid, p.start)
		if !ok {
			continue
		}
		n++
		_ = unix.PidfdSendSignal(fd, syscall.SIGSTOP, nil, 0) // it forks no more
		killTree(pid, o)
		_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
		o.keep(pid, fd)
	}
	return n
}

// reap reaps the kept processes that have exited and are this process's
// children, SIGKILLs those that still run, forgets those that are gone
// (reaped by their own parent), and returns how many it still keeps.
func (o *orphans) reap() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for pid, fd := range o.fds {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
		switch {
		case err == nil && info.Signo == int32(syscall.SIGCHLD): // reaped
		case err == nil || errors.Is(err, unix.EINTR): // our child, still running
			_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
			continue
		case errors.Is(err, unix.ECHILD):
			// not (yet) our child: its parent, of the run, is dying, or
			// reaped it already
			if unix.PidfdSendSignal(fd, 0, nil, 0) == nil {
				_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
				continue
			}
		}
		_ = unix.Close(fd)
		delete(o.fds, pid)
	}
	return len(o.fds)
}

// environHas reports whether the environment pid started with holds needle
// ("\x00NAME=value\x00").
func environHas(pid int, needle []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return false
	}
	env := make([]byte, 0, len(b)+2)
	env = append(append(append(env, 0), b...), 0)
	return bytes.Contains(env, needle)
}
