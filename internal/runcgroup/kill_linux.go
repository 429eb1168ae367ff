package runcgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// freezeTimeout bounds the wait for a cgroup to freeze: a process in an
// uninterruptible sleep freezes only when it leaves it. Kill goes on
// without it then (Remove kills again until the cgroup is empty).
const freezeTimeout = time.Second

// Kill sends SIGKILL to every process in the cgroup dir and in the cgroups
// below it, and returns how many it found. With keep nil it writes
// cgroup.kill where the kernel has it (5.14), which the kernel makes race
// free against forks. Otherwise, and where there is no cgroup.kill, it
// freezes the cgroup first, so that no process forks or exits while it
// lists them, opens a pidfd of each, and hands keep each pid and pidfd
// (the caller reaps and closes it: a process reparented to the caller is
// its child) before the kill; it thaws the cgroup after.
//
// Kill does not wait for the processes to exit (Remove does).
func Kill(dir string, keep func(pid, pidfd int)) (int, error) {
	if !event(dir, "populated") {
		return 0, nil // the end of every run that left nothing behind
	}
	hasKill := hasCgroupKill(dir)
	if hasKill && keep == nil {
		n := len(procs(dir))
		return n, write(dir, "cgroup.kill", "1")
	}
	if err := write(dir, "cgroup.freeze", "1"); err != nil {
		return 0, err
	}
	defer func() { _ = write(dir, "cgroup.freeze", "0") }()
	bounded(freezeTimeout, func() bool { return event(dir, "frozen") })

	listed := procs(dir)
	fds := make(map[int]int, len(listed))
	for _, pid := range listed {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	// a pid listed again after its pidfd was opened: the pidfd is of the
	// process in the cgroup, not of a stranger that took a freed pid
	again := procs(dir)
	for pid, fd := range fds {
		if !slices.Contains(again, pid) {
			_ = unix.Close(fd)
			delete(fds, pid)
		}
	}
	var err error
	if hasKill {
		err = write(dir, "cgroup.kill", "1")
	}
	for pid, fd := range fds {
		if !hasKill {
			_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
		}
		if keep != nil {
			keep(pid, fd)
		} else {
			_ = unix.Close(fd)
		}
	}
	return len(fds), err
}

// hasCgroupKill reports whether the kernel has cgroup.kill (tests act
// as if it had not).
var hasCgroupKill = cgroupKillFile

func cgroupKillFile(dir string) bool { return exists(filepath.Join(dir, "cgroup.kill")) }

// Remove kills every process in the cgroup dir (Kill), waits for them to
// exit, for at most d, and removes dir and the cgroups below it. A dir that
// does not exist is removed already. The error says what is still there.
func Remove(dir string, d time.Duration) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	empty := bounded(d, func() bool {
		if !event(dir, "populated") {
			return true
		}
		_, _ = Kill(dir, nil) // again: what forked before a kill without cgroup.kill
		return false
	})
	if !empty {
		return fmt.Errorf("runcgroup: %s still holds processes %v after %v", dir, procs(dir), d)
	}
	return removeTree(dir)
}

// removeTree removes dir's cgroups, deepest first, then dir.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runcgroup: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("runcgroup: remove %s: %w", dir, err)
	}
	return nil
}

// procs lists the processes in dir and in the cgroups below it.
func procs(dir string) []int {
	var out []int
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out
}

// event reports whether cgroup.events of dir says "<key> 1" ("populated":
// a process is in it or below; "frozen").
func event(dir, key string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return v == "1"
		}
	}
	return false
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("runcgroup: %w", err)
	}
	return nil
}

// bounded calls cond until it returns true, every millisecond, for at most
// d, and reports whether it did: the kernel says nothing when a cgroup
// empties or freezes unless polled (or watched), and it takes it
// microseconds to milliseconds.
func bounded(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return cond()
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
