//go:build linux

package supervisor_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/supervisor"
)

// start starts a supervised child with the test binary as supervisor.
func start(t *testing.T, spec supervisor.Spec) *supervisor.Process {
	t.Helper()
	spec.Path = os.Args[0]
	p, err := supervisor.Start(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, p.ChildPid())
	killAtCleanup(t, p.Pid())
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	return p
}

// wait waits up to 10s for p to exit.
func wait(t *testing.T, p *supervisor.Process) (int, error) {
	t.Helper()
	type result struct {
		code int
		err  error
	}
	c := make(chan result, 1)
	go func() {
		code, err := p.Wait()
		c <- result{code, err}
	}()
	select {
	case r := <-c:
		return r.code, r.err
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		<-c
		t.Fatalf("supervisor %d did not exit within 10s", p.Pid())
		return 0, nil
	}
}

// A supervisor killed after it read its request, before it reported whether
// the child started (a job that kills it at once, the OOM killer), fails
// Start with its signal, not as a program that is not baton.
func TestSupervisorKilledBeforeItReportsTheChildFailsStartByItsSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nread request <&3\nkill -KILL $$\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := supervisor.Start(testCtx(t), supervisor.Spec{Path: path, Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "died of signal killed before it said whether \"true\" started") ||
		strings.Contains(err.Error(), "is it baton") {
		t.Fatalf("Start = %v, want the supervisor's death by SIGKILL before its report", err)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		out    string
	}{
		{"echo out; echo err >&2", 0, "out\nerr\n"},
		{"exit 3", 3, ""},
		{"kill -9 $$", 128 + 9, ""},
		{"exit 254", 254, ""}, // the child's own 254 is not the deadline's
	} {
		t.Run(tc.script, func(t *testing.T) {
			var out syncBuffer
			p := start(t, supervisor.Spec{Args: []string{"sh", "-c", tc.script}, Stdout: &out, Stderr: &out})
			code, err := wait(t, p)
			if err != nil || code != tc.code {
				t.Fatalf("Wait = %d, %v; want %d, nil", code, err, tc.code)
			}
			if out.String() != tc.out {
				t.Errorf("output %q, want %q", out.String(), tc.out)
			}
			if p.KilledByDeadline() {
				t.Error("KilledByDeadline")
			}
		})
	}
}

func TestEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	p := start(t, supervisor.Spec{
		Args:   []string{"sh", "-c", `echo "$FOO $` + supervisor.EnvVar + `"; pwd`},
		Env:    []string{"FOO=bar", "PATH=" + os.Getenv("PATH"), supervisor.EnvVar + "=1", "GORACE=" + os.Getenv("GORACE")},
		Dir:    dir,
		Stdout: &out,
	})
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if want := "bar \n" + real + "\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestStartErrors(t *testing.T) {
	ctx := testCtx(t)
	_, err := supervisor.Start(ctx, supervisor.Spec{Path: os.Args[0], Args: []string{"baton-no-such-command"}})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing command: %v, want exec.ErrNotFound", err)
	}
	_, err = supervisor.Start(ctx, supervisor.Spec{Path: os.Args[0], Args: []string{"/no/such/file"}})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing file: %v, want exec.ErrNotFound", err)
	}
	_, err = supervisor.Start(ctx, supervisor.Spec{Path: os.Args[0], Args: []string{"true"}, Dir: "/no/such/dir"})
	if err == nil {
		t.Error("missing dir: no error")
	}
	_, err = supervisor.Start(ctx, supervisor.Spec{Path: "/bin/true", Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "MaybeRun") {
		t.Errorf("not a supervisor: %v", err)
	}
	_, err = supervisor.Start(ctx, supervisor.Spec{Path: os.Args[0], Args: []string{"true"}, Deadline: time.Now().Add(10 * time.Millisecond)})
	if !errors.Is(err, supervisor.ErrDeadline) {
		t.Errorf("deadline within the margin: %v, want ErrDeadline", err)
	}
}

func TestRunByHand(t *testing.T) {
	out, err := exec.Command(os.Args[0], supervisor.Arg).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != supervisor.ExitFailure {
		t.Fatalf("exit: %v, want %d; output %q", err, supervisor.ExitFailure, out)
	}
}

func TestDeadlineKills(t *testing.T) {
	var out syncBuffer
	// the 300ms deadline is set once the child runs: a supervisor slow to
	// start (a busy host) would otherwise refuse to start it at all
	p := start(t, supervisor.Spec{
		Args:     []string{"sleep", "100"},
		Stderr:   &out,
		Deadline: time.Now().Add(time.Minute),
	})
	begin := time.Now()
	if err := p.Extend(begin.Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	code, err := wait(t, p)
	if !errors.Is(err, supervisor.ErrDeadline) || code != supervisor.ExitDeadline || !p.KilledByDeadline() {
		t.Fatalf("Wait = %d, %v (KilledByDeadline %v); want %d, ErrDeadline", code, err, p.KilledByDeadline(), supervisor.ExitDeadline)
	}
	if took := time.Since(begin); took > 300*time.Millisecond+time.Second {
		t.Errorf("killed after %v", took)
	}
	if !strings.Contains(out.String(), "deadline") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stderr %q, want one line about the deadline", out.String())
	}
	waitGone(t, time.Second, p.ChildPid())
}

// TestDeadlineGraceFits: with a deadline 600ms away and the default 5s
// grace, the child still gets SIGTERM before SIGKILL. The short deadline is
// set once the child's trap is in place: a supervisor slow to start (a busy
// host) rightly refuses to start a child past its deadline, and a shell
// slow to reach its trap would die of the TERM.
func TestDeadlineGraceFits(t *testing.T) {
	var out syncBuffer
	p := start(t, supervisor.Spec{
		Args:     []string{"sh", "-c", `trap 'echo term; exit 0' TERM; echo ready; sleep 100 & wait`},
		Stdout:   &out,
		Deadline: time.Now().Add(time.Minute),
	})
	poll.Require(t, 10*time.Second, "the child's trap", func() bool { return strings.Contains(out.String(), "ready") })
	if err := p.Extend(time.Now().Add(600 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, p); !errors.Is(err, supervisor.ErrDeadline) {
		t.Fatalf("Wait: %v, want ErrDeadline", err)
	}
	if !strings.Contains(out.String(), "term") {
		t.Errorf("output %q: the child got no SIGTERM", out.String())
	}
}

func TestExtendKeepsChildAlive(t *testing.T) {
	const ttl = 300 * time.Millisecond
	// the lease's rhythm begins once the child runs (as above)
	p := start(t, supervisor.Spec{Args: []string{"sleep", "100"}, Deadline: time.Now().Add(time.Minute)})
	until := time.Now().Add(3 * ttl)
	for time.Now().Before(until) {
		if err := p.Extend(time.Now().Add(ttl)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 6) // real time: the extension rhythm of a lease; the supervisor process ends the child by CLOCK_BOOTTIME
	}
	if !alive(p.ChildPid()) {
		t.Fatal("child died although the deadline kept moving")
	}
	// No more extensions: the deadline ends it.
	if code, err := wait(t, p); !errors.Is(err, supervisor.ErrDeadline) {
		t.Fatalf("Wait = %d, %v; want ErrDeadline", code, err)
	}
}

func TestExtendEarlier(t *testing.T) {
	p := start(t, supervisor.Spec{Args: []string{"sleep", "100"}, Deadline: time.Now().Add(time.Hour)})
	if err := p.Extend(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, p); !errors.Is(err, supervisor.ErrDeadline) {
		t.Fatalf("Wait: %v, want ErrDeadline", err)
	}
	if err := p.Extend(time.Now().Add(time.Hour)); !errors.Is(err, supervisor.ErrDone) {
		t.Errorf("Extend after exit: %v, want ErrDone", err)
	}
}

func TestStopKillsGroup(t *testing.T) {
	gpid := filepath.Join(t.TempDir(), "gpid")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `sleep 100 & echo $! > ` + gpid + `; wait`}})
	grandchild := readPidFile(t, gpid)
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	code, err := wait(t, p)
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("Wait = %d, %v; want %d, nil", code, err, 128+int(syscall.SIGTERM))
	}
	waitGone(t, time.Second, p.ChildPid(), grandchild)
}

func TestStopEscalatesToKill(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `trap '' TERM; echo $$ > ` + ready + `; sleep 100`}})
	readPidFile(t, ready) // deaf to SIGTERM from now on
	begin := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	code, err := wait(t, p)
	if err != nil || code != 128+int(syscall.SIGKILL) {
		t.Errorf("Wait = %d, %v; want %d, nil", code, err, 128+int(syscall.SIGKILL))
	}
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Errorf("SIGKILL after %v, before the grace", took)
	}
}

func TestLeftoversKilled(t *testing.T) {
	gpid := filepath.Join(t.TempDir(), "gpid")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `sleep 100 & echo $! > ` + gpid}})
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	waitGone(t, time.Second, readPidFile(t, gpid))
}

func TestSupervisorKilled(t *testing.T) {
	p := start(t, supervisor.Spec{Args: []string{"sleep", "100"}})
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, p); err == nil || errors.Is(err, supervisor.ErrDeadline) {
		t.Errorf("Wait: %v, want the supervisor's death", err)
	}
	waitGone(t, 2*time.Second, p.ChildPid()) // its parent-death signal
}

// A supervisor that does not react (frozen) is killed with its child's whole
// process group: the processes the child started go too.
func TestSupervisorKilledTakesTheGroup(t *testing.T) {
	gpid := filepath.Join(t.TempDir(), "gpid")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `sleep 100 & echo $! > ` + gpid + `; wait`}})
	grandchild := readPidFile(t, gpid)
	killAtCleanup(t, grandchild)
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil { // unresponsive
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = wait(t, p)
	waitGone(t, 2*time.Second, p.ChildPid(), grandchild)
}

// startHelper starts the test binary as a stand-in for baton (helperMain) and
// returns it with the supervisor's, the child's and the grandchild's pids.
func startHelper(t *testing.T, mode string) (helper *exec.Cmd, sup, child, grandchild int) {
	t.Helper()
	gpid := filepath.Join(t.TempDir(), "gpid")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GPID_FILE="+gpid)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if _, err := fmt.Sscan(s, &sup, &child); err != nil {
			t.Fatalf("helper said %q: %v", s, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not report its supervisor")
	}
	killAtCleanup(t, sup)
	killAtCleanup(t, child)
	return cmd, sup, child, readPidFile(t, gpid)
}

// TestParentFrozen: baton (the helper) stops itself right after moving its
// running child's deadline to 500ms away; the supervisor kills the child's
// group on its own while baton stays frozen.
func TestParentFrozen(t *testing.T) {
	helper, sup, child, grandchild := startHelper(t, "freeze")
	poll.Require(t, 10*time.Second, "the helper to stop", func() bool { return procState(helper.Process.Pid) == "T" })
	waitGone(t, 5*time.Second, child, grandchild, sup)
	if st := procState(helper.Process.Pid); st != "T" {
		t.Errorf("helper state %q: it was not frozen throughout", st)
	}
}

// TestParentKilled: when baton (the helper) is SIGKILLed, its supervisor
// stops the child's group and exits.
func TestParentKilled(t *testing.T) {
	helper, sup, child, grandchild := startHelper(t, "hold")
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 10*time.Second, child, grandchild, sup)
}

// A job that leaves its process group and session (setsid), even through a
// double fork that orphans the daemon, is still stopped at the deadline:
// the supervisor is a child subreaper and signals every descendant.
func TestDeadlineKillsSetsidEscapees(t *testing.T) {
	dir := t.TempDir()
	inner, orphan := filepath.Join(dir, "inner"), filepath.Join(dir, "orphan")
	// inner: setsid'd, its parent (the child) alive; orphan: setsid'd by a
	// subshell that exits at once
	script := `setsid sleep 100 & echo $! > ` + inner + `
( setsid sh -c 'echo $$ > ` + orphan + `; exec sleep 100' & )
sleep 100`
	// the deadline comes once the escapees are set up (a busy host may
	// take seconds to get there)
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", script}, Deadline: time.Now().Add(time.Minute)})
	a, b := readPidFile(t, inner), readPidFile(t, orphan)
	killAtCleanup(t, a)
	killAtCleanup(t, b)
	for _, pid := range []int{a, b} {
		// the shell writes inner's pid as it forks it, before setsid runs
		var sid int
		if !poll.Until(5*time.Second, func() bool { sid, _ = unix.Getsid(pid); return sid == pid }) {
			t.Fatalf("pid %d is in session %d: the test did not set up an escapee", pid, sid)
		}
	}
	if err := p.Extend(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if code, err := wait(t, p); !errors.Is(err, supervisor.ErrDeadline) {
		t.Fatalf("Wait = %d, %v; want ErrDeadline", code, err)
	}
	// gone, not even zombies: the supervisor reaped what was reparented to it
	for _, pid := range []int{a, b} {
		if st := procState(pid); st != "" {
			t.Errorf("pid %d survived the deadline (state %s)", pid, st)
		}
	}
}

// The same after a normal exit: a daemon the job started does not outlive
// the run.
func TestLeftoversOutsideTheGroupKilled(t *testing.T) {
	orphan := filepath.Join(t.TempDir(), "orphan")
	// the run ends once the daemon wrote its pid (a fixed wait let the
	// run end first on a loaded machine: the daemon was killed unwritten)
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `( setsid sh -c 'echo $$ > ` + orphan + `.tmp; mv ` + orphan + `.tmp ` + orphan + `; exec sleep 100' & )
until [ -s ` + orphan + ` ]; do sleep 0.01; done`}})
	pid := readPidFile(t, orphan)
	killAtCleanup(t, pid)
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	if st := procState(pid); st != "" {
		t.Errorf("daemon %d outlived the run (state %s)", pid, st)
	}
}
