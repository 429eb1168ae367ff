//go:build linux

// Package runcgrouptest gives tests a cgroup v2 Root of their own, removed
// with everything in it when the test ends, and a job that tries every way
// out of its run but a cgroup.
package runcgrouptest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/runcgroup"
)

// Root makes a cgroup below this process's own, for the test's runs, and
// returns it opened as a Root; it is removed, with whatever is left in it,
// when the test ends. Only processes the test starts go into it: never
// this process, never its parent. The test is skipped where there is no
// writable cgroup v2.
func Root(t testing.TB) *runcgroup.Root {
	t.Helper()
	own, err := runcgroup.Open("")
	if err != nil {
		t.Skipf("needs a writable cgroup v2 (root, or a delegated subtree): %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	dir := filepath.Join(own.Dir(), "runcgroup-test-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup for the test: %v", err)
	}
	t.Cleanup(func() {
		if err := runcgroup.Remove(dir, runcgroup.RemoveTimeout); err != nil {
			t.Errorf("removing the test's cgroup: %v", err)
		}
	})
	r, err := runcgroup.Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return r
}

// Escapee returns a line of sh that starts, in the background, a process
// that leaves its session (setsid), clears its environment (env -i), takes
// another name (bash's exec -a) and sleeps, after writing its pid to
// pidFile. Only its cgroup tells it is the run's. The test is skipped
// where there is no bash.
func Escapee(t testing.TB, pidFile string) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash (exec -a renames the process)")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("needs sleep")
	}
	return `setsid env -i ` + bash + ` -c 'echo $$ > ` + pidFile + `; exec -a renamed ` + sleep + ` 1000' &`
}

// Alive reports whether pid runs: it exists and is not a zombie.
func Alive(pid int) bool {
	st, ok := stat(pid)
	return ok && st[0][0] != 'Z' && st[0][0] != 'X'
}

// Exists reports whether pid exists, a zombie or not: a process killed and
// reaped does not.
func Exists(pid int) bool {
	_, ok := stat(pid)
	return ok
}

// stat returns the fields of /proc/PID/stat after the command's name.
func stat(pid int) ([][]byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f := bytes.Fields(b[i+1:])
	return f, len(f) >= 20
}

// StartIn starts sh -c script in the cgroup dir (clone3 into it, as the
// supervisor starts a run's child), in a directory of its own, and reaps it
// at the end of the test.
func StartIn(t testing.TB, dir, script string) *exec.Cmd {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// EscapeeIn starts, in the cgroup dir, a shell that starts an Escapee and
// waits; it returns the escapee's pid once it has escaped.
func EscapeeIn(t testing.TB, dir string) int {
	t.Helper()
	cmd := StartIn(t, dir, Escapee(t, "escapee")+` wait`)
	return EscapeePid(t, filepath.Join(cmd.Dir, "escapee"))
}

// EscapeePid waits for pidFile to hold the pid of an Escapee, and for it
// to escape (RequireEscaped), and kills it at the end of the test should
// it still run.
func EscapeePid(t testing.TB, pidFile string) int {
	t.Helper()
	var pid int
	poll.Require(t, 10*time.Second, "a pid in "+pidFile, func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	t.Cleanup(func() {
		if Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	RequireEscaped(t, pid)
	return pid
}

// CgroupOf makes, in root, a run's cgroup as the process pid would name
// it, and returns its directory.
func CgroupOf(t testing.TB, root *runcgroup.Root, pid int) string {
	t.Helper()
	owner, err := runcgroup.Owner(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root.Dir(), owner+"0badcafe-nightly")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Leftover makes, in root, what a crashed baton leaves behind: the cgroup
// of a run of a process that is gone, holding an Escapee (and the shell
// that started it). It returns the cgroup's directory and the escapee's
// pid.
func Leftover(t testing.TB, root *runcgroup.Root) (dir string, escapee int) {
	t.Helper()
	gone := exec.Command("sleep", "1000")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	dir = CgroupOf(t, root, gone.Process.Pid)
	_ = gone.Process.Kill()
	_ = gone.Wait()
	return dir, EscapeeIn(t, dir)
}

// RequireEmpty fails the test unless root holds no cgroup.
func RequireEmpty(t testing.TB, root *runcgroup.Root) {
	t.Helper()
	ents, err := os.ReadDir(root.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("cgroup %s left in %s", e.Name(), root.Dir())
		}
	}
}

// RequireEscaped fails the test unless pid, within 10s, has left its
// session, holds none of the run's variables (BATON_*: bash sets only PWD
// and SHLVL) and is named "renamed": the test set up
// the escapee it meant to.
func RequireEscaped(t testing.TB, pid int) {
	t.Helper()
	proc := "/proc/" + strconv.Itoa(pid)
	escaped := func() bool {
		sid, _ := unix.Getsid(pid)
		env, err1 := os.ReadFile(proc + "/environ")
		cmd, err2 := os.ReadFile(proc + "/cmdline")
		return sid == pid && err1 == nil && !strings.Contains(string(env), "BATON_") && err2 == nil && strings.HasPrefix(string(cmd), "renamed\x00")
	}
	poll.Require(t, 10*time.Second, "pid "+strconv.Itoa(pid)+" to leave its session, clear its environment and rename itself", escaped)
}
