package supervisor

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): a process
// of the job orphaned by its parent's exit (a daemon that double-forked)
// is reparented to the supervisor, not to init. With that, every process
// the job started stays a descendant of the supervisor, whatever process
// group or session it moved to with setsid(), and the signals that end a
// run (the deadline, a stop, the final sweep) go to every descendant as
// well as to the child's process group.

// becomeSubreaper makes orphaned descendants the supervisor's children.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	ppid   int
	start  uint64 // start time in clock ticks after boot: tells pid reuse apart
	zombie bool
}

// readStat reads pid's parent, start time and state.
func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	// after comm: state(0) ppid(1) ... starttime is field 22 of stat, 19 here
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{ppid: ppid, start: start, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// scan returns every process in /proc.
func scan() map[int]proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	all := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			all[pid] = p
		}
	}
	return all
}

// descendants returns every process below root, by a scan of /proc.
func descendants(root int) map[int]proc {
	all := scan()
	children := map[int][]int{}
	for pid, p := range all {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	out := map[int]proc{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if _, seen := out[c]; !seen {
				out[c] = all[c]
				queue = append(queue, c)
			}
		}
	}
	return out
}

// signalDescendants sends sig to every live descendant of the supervisor
// and returns how many it signalled.
func signalDescendants(sig syscall.Signal) int { return signalTree(os.Getpid(), sig, nil) }

// signalTree sends sig to every live descendant of root and returns how
// many it signalled. A pid is signalled through a pidfd opened after the
// scan and checked against the scan's start time, so a pid reused by a
// stranger in between is never hit. If keep is not nil, it takes the pidfd
// of every process signalled (to reap it should it become this process's
// child).
func signalTree(root int, sig syscall.Signal, keep *orphans) int {
	n := 0
	for pid, p := range descendants(root) {
		if p.zombie {
			continue
		}
		fd, ok := openPidfd(pid, p.start)
		if !ok {
			continue // gone (ESRCH), or a kernel without pidfds: the group kill still applies
		}
		if unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
			if keep != nil {
				keep.keep(pid, fd)
				continue
			}
		}
		_ = unix.Close(fd)
	}
	return n
}

// openPidfd opens a pidfd of pid and checks that the process is the one
// that started at start (clock ticks after boot): the pidfd then refers to
// it, whatever becomes of the pid.
func openPidfd(pid int, start uint64) (int, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, false
	}
	if now, ok := readStat(pid); !ok || now.start != start {
		_ = unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// sweep SIGKILLs every descendant until none is left alive, for at most d:
// a process killed mid-fork may leave a child that the next round finds.
func sweep(d time.Duration) {
	end := time.Now().Add(d)
	for signalDescendants(syscall.SIGKILL) > 0 && time.Now().Before(end) {
		time.Sleep(time.Millisecond)
	}
}

// reapOrphans reaps the descendants that were reparented to the
// supervisor, once the child itself has been reaped; it returns when none
// is left, or after d.
func reapOrphans(d time.Duration) {
	end := time.Now().Add(d)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD: nothing left
			return
		case pid > 0:
			continue
		}
		if time.Now().After(end) {
			return
		}
		sweep(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
}

// killTree kills every descendant of root, a supervisor that no longer
// answers (baton's last resort) and that the caller stopped, before root
// itself is killed. They are stopped first, in rounds, so none forks a
// process the kill would miss. keep takes their pidfds: once root is gone
// they are reparented to this process, a subreaper, which reaps them.
func killTree(root int, keep *orphans) {
	for range 3 {
		signalTree(root, syscall.SIGSTOP, nil)
	}
	signalTree(root, syscall.SIGKILL, keep)
}

// reapZombies reaps the supervisor's direct children that have exited,
// except keep (the child, which is waited for elsewhere): orphans of the
// job reparented here would otherwise stay zombies for as long as the job
// runs.
func reapZombies(keep int) {
	self := os.Getpid()
	for pid, p := range descendants(self) {
		if p.ppid == self && p.zombie && pid != keep {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// waitExited waits until pid has exited, without reaping it: while it is a
// zombie its pid cannot be reused.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
