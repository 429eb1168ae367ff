package executor_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/jobs"
)

// execJob is an exec job running sh -c script. Under -race its supervisor
// (this test binary) would sleep 1s before exiting 0 without GORACE.
func execJob(t *testing.T, script string) *config.Job {
	if runtime.GOOS != "linux" {
		t.Skip("exec jobs need the Linux supervisor")
	}
	return &config.Job{
		Name: "cmd",
		Exec: &config.ExecSpec{
			Command: []string{"sh", "-c", script},
			Env:     map[string]string{"GORACE": "atexit_sleep_ms=0 " + os.Getenv("GORACE")},
		},
	}
}

// pidAlive reports whether pid runs (exists and is not a zombie).
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// pidsGone fails the test unless every pid has exited within d.
func pidsGone(t *testing.T, d time.Duration, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if !poll.Until(d, func() bool { return !pidAlive(pid) }) {
			t.Errorf("pid %d still alive after %v", pid, d)
		}
	}
}

// pidFrom waits up to 10s for path to hold a pid, and kills that process at
// cleanup should it still run. The commands write it beside and move it
// in (echo $$ > pid.tmp; mv pid.tmp pid): a command killed between the
// redirection's create and the echo leaves no empty file a test would take
// for a command that started.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	var pid int
	if !poll.Until(10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}) {
		t.Fatalf("no pid in %s", path)
	}
	t.Cleanup(func() {
		if pidAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// execAsync runs Execute in a goroutine; the result arrives on the channel.
type execResult struct {
	res jobs.Result
	err error
}

func execAsync(ctx context.Context, e *executor.Executor, j *config.Job, v executor.Validity) <-chan execResult {
	c := make(chan execResult, 1)
	go func() {
		res, err := e.Execute(ctx, j, exRun(j.Name), v)
		c <- execResult{res, err}
	}()
	return c
}

// await waits up to 10s for an execution's result.
func await(t *testing.T, c <-chan execResult) execResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Execute did not return within 10s")
		return execResult{}
	}
}

func TestExecEnvContract(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BATON_TEST_INHERITED", "from-baton")
	t.Setenv("REDISCLI_AUTH", "s3cret-password")
	t.Setenv("APP_MODE", "prod")
	// an inherited descriptor that is not close-on-exec (a parent's leak)
	leak, err := syscall.Dup(int(os.Stderr.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak)
	j := execJob(t, `env > env.txt; pwd > pwd.txt; [ -e /proc/$$/fd/`+strconv.Itoa(leak)+` ] && echo leaked > fd.txt; echo done`)
	j.Exec.Dir = dir
	j.Exec.InheritEnv = []string{"APP_*"}
	j.Exec.Env["FOO"] = "bar baz"
	j.Exec.Env["BATON_JOB"] = "spoofed" // config rejects it; the run's value wins anyway
	res, err := exExecutor().Execute(exCtx(t), j, exRun("cmd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Output) != "done\n" || res.Duration <= 0 || res.KilledByDeadline {
		t.Errorf("Result %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	want := map[string]string{
		"BATON_JOB":           "cmd",
		"BATON_TICK":          "2026-01-02T03:04:00Z",
		"BATON_RUN_ID":        "run-1",
		"BATON_ATTEMPT":       "2",
		"BATON_FENCING_TOKEN": "42",
		"BATON_REPLICA":       "replica-a",
		"FOO":                 "bar baz",
		"APP_MODE":            "prod",
		"PATH":                os.Getenv("PATH"),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["BATON_SUPERVISOR"]; ok {
		t.Error("the child sees BATON_SUPERVISOR")
	}
	// only the allowlist of baton's own environment: no secrets
	for _, k := range []string{"REDISCLI_AUTH", "BATON_TEST_INHERITED"} {
		if _, ok := env[k]; ok {
			t.Errorf("the child inherited %s", k)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fd.txt")); err == nil {
		t.Errorf("the child inherited baton's descriptor %d", leak)
	}
	pwd, _ := os.ReadFile(filepath.Join(dir, "pwd.txt"))
	if real, _ := filepath.EvalSymlinks(dir); strings.TrimSpace(string(pwd)) != real {
		t.Errorf("dir %q, want %q", pwd, real)
	}
}

func TestExecNonZeroExit(t *testing.T) {
	res, err := exExecutor().Execute(exCtx(t), execJob(t, `echo oops >&2; exit 3`), exRun("cmd"), nil)
	if !errors.Is(err, executor.ErrNonZeroExit) || res.ExitCode != 3 || string(res.Output) != "oops\n" {
		t.Errorf("Execute = %+v, %v; want exit code 3, ErrNonZeroExit", res, err)
	}
	if err != nil && !strings.Contains(err.Error(), "3") {
		t.Errorf("error %q does not name the code", err)
	}
}

func TestExecOutputKeepsTheEnd(t *testing.T) {
	// about 1.2 MB on stdout and stderr; the result keeps the last 64 KiB
	j := execJob(t, `seq 1 100000; seq 100001 200000 >&2`)
	res, err := exExecutor().Execute(exCtx(t), j, exRun("cmd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != executor.DefaultOutputLimit || !bytes.HasSuffix(res.Output, []byte("\n199999\n200000\n")) {
		t.Errorf("kept %d bytes ending %q", len(res.Output), res.Output[max(len(res.Output)-20, 0):])
	}
}

func TestExecCommandNotFound(t *testing.T) {
	j := execJob(t, "")
	j.Exec.Command = []string{"baton-no-such-command"}
	_, err := exExecutor().Execute(exCtx(t), j, exRun("cmd"), nil)
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "baton-no-such-command") {
		t.Errorf("error %v, want exec.ErrNotFound naming the command", err)
	}
}

func TestExecCancelKillsGroup(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `echo $$ > pid.tmp; mv pid.tmp pid; sleep 100 & echo $! > gpid; wait`)
	j.Exec.Dir = dir
	ctx, cancel := context.WithCancelCause(exCtx(t))
	done := execAsync(ctx, exExecutor(), j, nil)
	child, grandchild := pidFrom(t, filepath.Join(dir, "pid")), pidFrom(t, filepath.Join(dir, "gpid"))
	stop := errors.New("replaced")
	cancel(stop)
	r := await(t, done)
	// (Under load the cancel can come while Execute still waits for the
	// supervisor's word that the command runs: no exit code then.)
	if !errors.Is(r.err, stop) {
		t.Errorf("Execute = %+v, %v; want the cause", r.res, r.err)
	}
	pidsGone(t, 2*time.Second, child, grandchild)
}

func TestExecTimeout(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `trap '' TERM; echo $$ > pid.tmp; mv pid.tmp pid; sleep 100`) // deaf to SIGTERM: SIGKILL after timeout/10
	j.Exec.Dir = dir
	j.Timeout = 300 * time.Millisecond
	r := await(t, execAsync(exCtx(t), exExecutor(), j, nil))
	if _, err := os.Stat(filepath.Join(dir, "pid")); err != nil {
		// the timeout bounds the start too: on a busy host it can end
		// the run before the supervisor has started the command
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("Execute = %+v, %v; want DeadlineExceeded", r.res, r.err)
		}
		t.Skipf("the timeout came before the command started (%v): nothing to kill", err)
	}
	// SIGKILL's code, or SIGTERM's if the timeout came before the trap
	if !errors.Is(r.err, context.DeadlineExceeded) || (r.res.ExitCode != 128+int(syscall.SIGKILL) && r.res.ExitCode != 128+int(syscall.SIGTERM)) {
		t.Errorf("Execute = %+v, %v; want a signal's exit code and DeadlineExceeded", r.res, r.err)
	}
}

// TestExecLeaseDeadline: the lease's deadline is 300ms away and never
// moves, and nothing cancels ctx (as if baton were frozen): the supervisor
// kills the command on its own.
func TestExecLeaseDeadline(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 100`)
	j.Exec.Dir = dir
	begin := time.Now()
	r := await(t, execAsync(exCtx(t), exExecutor(), j, newValidity(300*time.Millisecond)))
	if !errors.Is(r.err, executor.ErrLeaseDeadline) {
		t.Fatalf("Execute = %+v, %v; want ErrLeaseDeadline", r.res, r.err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pid")); err != nil {
		t.Skipf("the supervisor started too late to run the command (%v): nothing to kill", err)
	}
	if !r.res.KilledByDeadline || !strings.Contains(string(r.res.Output), "deadline") {
		t.Errorf("Result %+v", r.res)
	}
	if took := time.Since(begin); took > 300*time.Millisecond+2*time.Second {
		t.Errorf("killed after %v", took)
	}
	pidsGone(t, time.Second, pidFrom(t, filepath.Join(dir, "pid")))
}

func TestExecDeadlinePassedBeforeStart(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `touch ran`)
	j.Exec.Dir = dir
	_, err := exExecutor().Execute(exCtx(t), j, exRun("cmd"), newValidity(-time.Second))
	if !errors.Is(err, executor.ErrLeaseDeadline) {
		t.Errorf("error %v, want ErrLeaseDeadline", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran without a lease")
	}
}

// extendedWhileStarting is a lease whose deadline, as first read, is about
// to pass, and which is extended right after: the supervisor, slow to start
// on a busy host, is handed a deadline the lease has already moved past.
type extendedWhileStarting struct {
	*validity
	reads atomic.Int32
}

func (v *extendedWhileStarting) Deadline() time.Time {
	if v.reads.Add(1) == 1 {
		return time.Now().Add(time.Millisecond)
	}
	return v.validity.Deadline()
}

// A lease extended while the supervisor starts: the command starts under the
// extended deadline, not refused for the deadline it was first handed.
func TestExecStartsUnderALeaseExtendedWhileStarting(t *testing.T) {
	v := &extendedWhileStarting{validity: newValidity(time.Minute)}
	r := await(t, execAsync(exCtx(t), exExecutor(), execJob(t, `echo ran`), v))
	if r.err != nil || string(r.res.Output) != "ran\n" {
		t.Errorf("Execute = %+v, %v; want the command run under the extended lease", r.res, r.err)
	}
}

// aheadValidity is a lease extended without pause: its deadline, read at
// any moment, is ttl ahead (a test's ticker standing in for the extensions
// would stall on a busy host and let the lease lapse for real). It keeps
// the longest pause between two reads: how late the executor forwarded an
// extension.
type aheadValidity struct {
	ttl      time.Duration
	mu       sync.Mutex
	last     time.Time
	longest  time.Duration
	readings int
}

func (v *aheadValidity) Deadline() time.Time {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.readings > 1 { // (the first two readings straddle the supervisor's start)
		v.longest = max(v.longest, now.Sub(v.last))
	}
	v.last = now
	v.readings++
	return now.Add(v.ttl)
}

func (v *aheadValidity) Done() <-chan struct{} { return nil }

func (v *aheadValidity) pause() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.longest
}

// TestExecLeaseExtended: extensions forwarded to the supervisor keep the
// command alive well past the first deadline, with the shortest lease a
// job can have (lock_ttl 1s). The supervisor sends SIGTERM when no
// extension came for half the time left (about 475ms): a run killed after
// the executor itself stalled that long (a busy host) is a lease rightly
// ended, not evidence, and is tried again, at most three times.
func TestExecLeaseExtended(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	for attempt := 1; ; attempt++ {
		v := &aheadValidity{ttl: ttl}
		r := await(t, execAsync(exCtx(t), exExecutor(), execJob(t, `sleep 3; echo finished`), v))
		if r.err == nil && !r.res.KilledByDeadline && string(r.res.Output) == "finished\n" {
			return
		}
		if !r.res.KilledByDeadline || v.pause() < ttl/4 || attempt == 3 {
			t.Fatalf("Execute = %+v, %v (attempt %d; longest pause between extensions %v)", r.res, r.err, attempt, v.pause())
		}
		t.Logf("attempt %d: killed after the executor paused %v between extensions (a busy host): again", attempt, v.pause())
	}
}

// TestExecLeaseEnded: the lease's Done stops the command like ctx does.
func TestExecLeaseEnded(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 100`)
	j.Exec.Dir = dir
	v := newValidity(time.Hour)
	done := execAsync(exCtx(t), exExecutor(), j, v)
	pid := pidFrom(t, filepath.Join(dir, "pid"))
	v.end()
	r := await(t, done)
	if r.err == nil || r.res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("Execute = %+v, %v; want a stop by SIGTERM", r.res, r.err)
	}
	pidsGone(t, time.Second, pid)
}

// A job that starts a setsid'd process and then SIGKILLs its supervisor
// leaves nothing running: the executor's process is a child subreaper,
// gets the orphans and kills them before Execute returns.
func TestExecJobThatKillsItsSupervisorLeavesNoSetsidDescendant(t *testing.T) {
	dir := t.TempDir()
	j := execJob(t, `setsid sh -c 'echo $$ > escapee; exec sleep 1000' &
until [ -s escapee ]; do sleep 0.01; done
kill -KILL $PPID
exec sleep 1000`)
	j.Exec.Dir = dir
	done := execAsync(exCtx(t), exExecutor(), j, nil)
	escapee := pidFrom(t, filepath.Join(dir, "escapee"))
	r := await(t, done)
	if r.err == nil || !strings.Contains(r.err.Error(), "signal") {
		t.Errorf("Execute = %+v, %v; want the supervisor's death", r.res, r.err)
	}
	if pidAlive(escapee) {
		t.Errorf("setsid'd pid %d outlived its killed supervisor", escapee)
	}
}

// A lease whose ttl leaves the supervisor no time to start (here shorter
// than its kill margin; on a host where a start takes longer than the ttl,
// the same) is not started again and again while it is extended: Execute
// gives up after a few starts, saying the lease is too short.
func TestExecGivesUpOnALeaseTooShortToStartUnder(t *testing.T) {
	v := &aheadValidity{ttl: 40 * time.Millisecond}
	r := await(t, execAsync(exCtx(t), exExecutor(), execJob(t, `echo ran`), v))
	if !errors.Is(r.err, executor.ErrLeaseDeadline) || !strings.Contains(r.err.Error(), "shorter than a start takes") || len(r.res.Output) != 0 {
		t.Fatalf("Execute = %+v, %v; want a refusal saying the lease is too short to start under", r.res, r.err)
	}
}
