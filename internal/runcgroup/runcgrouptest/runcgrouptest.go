// Package runcgrouptest gives tests a cgroup v2 Root of their own, removed
// with everything in it when the test ends, and a job that tries every way
// out of its run but a cgroup.
package runcgrouptest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
		}
	}
	return false
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
