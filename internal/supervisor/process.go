package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/runcgroup"
)

// Spec says what to run under a supervisor.
type Spec struct {
	// Path is the executable to run as the supervisor: a binary whose main
	// calls MaybeRun. Default os.Executable().
	Path string
	// Args is the child's argv; Args[0] is looked up in PATH (the PATH of
	// Env) unless it contains a slash. No shell is involved. Required.
	Args []string
	// Env is the child's environment. Nil means this process's environment.
	Env []string
	// Dir is the child's working directory. Empty means this process's.
	Dir string
	// Stdout and Stderr receive the child's output (and the supervisor's
	// own one-line messages on Stderr). Nil means /dev/null. If they are
	// the same writer, output arrives on one pipe, in order.
	Stdout, Stderr io.Writer
	// Stdin is the child's standard input. Nil means /dev/null.
	Stdin io.Reader
	// Deadline is the initial validity deadline. Zero means none: only Stop,
	// the end of this process and Extend can end the child.
	Deadline time.Time
	// Grace is the time between SIGTERM and SIGKILL when the deadline
	// nears, when this process dies, and when the supervisor gets SIGTERM.
	// The deadline's SIGTERM comes no earlier than half the time left when
	// the deadline was set, so that a short lease is not cut off between
	// two regular extensions. Default DefaultGrace (5s).
	Grace time.Duration
	// Margin is how long before the deadline the SIGKILL goes out: room
	// for delivering it and for the kernel to end the processes. Default
	// DefaultMargin (50ms).
	Margin time.Duration
	// Quiet keeps the supervisor from writing its own line to Stderr when
	// the deadline killed the child (Wait's error says it anyway).
	Quiet bool
	// Cgroups, if not nil, is where the run gets a cgroup v2 of its own,
	// named after Name: the child starts in it (it cannot fork before it
	// is inside), the supervisor's SIGKILL and its final sweep kill every
	// process in it, and before Wait returns this process kills what is
	// left there, even a process that left the group, was orphaned,
	// renamed itself and cleared its environment, and removes the cgroup.
	// Nil means none: the process group, the supervisor's descendants and
	// the TreeEnv mark find the run's processes.
	Cgroups *runcgroup.Root
	// Name names the run's cgroup (a job's name). Default the base name of
	// Args[0].
	Name string
}

// Process is a running supervisor and its child.
type Process struct {
	cmd      *exec.Cmd
	pid      int
	childPid int
	mark     string   // TreeEnv in the child's environment
	orphans  *orphans // the run's processes this process may have to reap
	cgroup   string   // the run's cgroup, "" for none
	cgErr    error    // why the run's cgroup could not be removed, set before done closes

	mu  sync.Mutex // serializes control writes
	ctl *os.File   // nil once closed

	done    chan struct{} // closed when the supervisor has been reaped
	reapMu  sync.Mutex
	reaped  bool  // the supervisor exited: its pid may be reused by now
	waitErr error // of cmd.Wait, set before done closes

	status     *os.File
	first      chan statusLine // the first status line
	statusDone chan struct{}   // closed when the status pipe hit EOF
	hit        atomic.Bool     // a deadline timer fired

	waitOnce sync.Once
	code     int
	err      error
}

type statusLine struct {
	verb, rest string
}

// waitDelay bounds how long Wait waits for the output pipes after the
// supervisor exited (a process that left the group may still hold them).
const waitDelay = 2 * time.Second

// controlTimeout bounds one write on the control pipe: a supervisor that
// stopped reading (frozen like its parent can be) must not block baton.
const controlTimeout = time.Second

// startTimeout bounds Start when ctx does not: a Spec.Path that is not a
// supervisor may neither exit nor answer.
const startTimeout = 30 * time.Second

// Start starts a supervisor that starts spec.Args, and returns once the
// child runs. The first Start makes this process a child subreaper (on
// Linux), so that a run's processes orphaned by the death of their
// supervisor come to it rather than to init; they are killed and reaped
// before Wait returns. (Orphans of other children of this process come to
// it too: those it does not reap.) ctx bounds only the start, which takes startTimeout (30s) at
// most: if it ends first, the child's process group (should the
// child have started) is killed, the supervisor exits, and Start returns an
// error wrapping ctx's cause. Ending the child later is up to Stop, the
// deadline, or the end of this process.
//
// A child that cannot be started is an error wrapping exec.ErrNotFound (no
// such command) or fs.ErrPermission, with the supervisor's message. A
// deadline that has passed (within Spec.Margin) before the child could start
// is an error wrapping ErrDeadline: the child is not started.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if !supported {
		return nil, fmt.Errorf("supervisor: %w on %s", errors.ErrUnsupported, runtime.GOOS)
	}
	if len(spec.Args) == 0 || spec.Args[0] == "" {
		return nil, errors.New("supervisor: empty command")
	}
	if spec.Path == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervisor: own executable: %w", err)
		}
		spec.Path = p
	}
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.Margin <= 0 {
		spec.Margin = DefaultMargin
	}
	if !spec.Deadline.IsZero() && time.Until(spec.Deadline) <= spec.Margin {
		return nil, fmt.Errorf("%w before %q could start", ErrDeadline, spec.Args[0])
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("supervisor: start: %w", context.Cause(ctx))
	}
	if err := becomeSubreaperOnce(); err != nil {
		return nil, fmt.Errorf("supervisor: cannot become a child subreaper: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, startTimeout,
		fmt.Errorf("supervisor: %s did not start %q within %v", spec.Path, spec.Args[0], startTimeout))
	defer cancel()

	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	cgroup, err := newCgroup(spec)
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		stR.Close()
		stW.Close()
		return nil, err
	}
	cmd := exec.Command(spec.Path, Arg)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.ExtraFiles = []*os.File{ctlR, stW} // fds 3 and 4
	cmd.SysProcAttr = supervisorAttr()
	cmd.WaitDelay = waitDelay
	p := &Process{
		cmd:        cmd,
		ctl:        ctlW,
		done:       make(chan struct{}),
		status:     stR,
		first:      make(chan statusLine, 1),
		statusDone: make(chan struct{}),
		mark:       newMark(),
		orphans:    newOrphans(),
		cgroup:     cgroup,
	}
	err = StartLocked(cmd, func() {
		waitExited(cmd.Process.Pid) // without reaping: Kill may still use the pid
		p.reapMu.Lock()
		p.reaped = true
		p.reapMu.Unlock()
		p.waitErr = cmd.Wait()
		// what the supervisor left behind, should it have died before its
		// child's processes (a job that killed it): the run's cgroup holds
		// all of them; the mark finds them where there is none
		if p.cgroup != "" {
			_, _ = runcgroup.Kill(p.cgroup, p.orphans.keep)
		}
		p.orphans.sweep(p.mark, sweepTimeout)
		if p.cgroup != "" {
			p.cgErr = runcgroup.Remove(p.cgroup, runcgroup.RemoveTimeout)
		}
		close(p.done)
	})
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		if cgroup != "" {
			_ = runcgroup.Remove(cgroup, runcgroup.RemoveTimeout)
		}
		return nil, fmt.Errorf("supervisor: start %s: %w", spec.Path, err)
	}
	p.pid = cmd.Process.Pid
	go p.readStatus()

	answered := false // the supervisor said something: it is not stuck
	fail := func(err error) (*Process, error) {
		p.abort(answered)
		return nil, err
	}
	req, err := request{
		Argv:     spec.Args,
		Grace:    int64(spec.Grace),
		Margin:   int64(spec.Margin),
		Deadline: toMono(spec.Deadline),
		Quiet:    spec.Quiet,
		Mark:     p.mark,
		Cgroup:   cgroup,
	}.encode()
	if err != nil {
		return fail(fmt.Errorf("supervisor: %w", err))
	}
	// A big request fills the pipe until the supervisor reads it: let ctx
	// interrupt the write.
	unblock := context.AfterFunc(ctx, func() { _ = ctlW.SetWriteDeadline(time.Unix(1, 0)) })
	_, err = ctlW.Write(req)
	unblock()
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		if errors.Is(err, syscall.EPIPE) {
			return fail(notSupervisor(spec, err))
		}
		return fail(fmt.Errorf("supervisor: sending the request: %w", err))
	}
	var st statusLine
	select {
	case st = <-p.first:
	case <-p.statusDone:
		select {
		case st = <-p.first: // it said something before it exited
		default:
			_, err := p.Wait()
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				// it ran the child, maybe: a job that killed its
				// supervisor, the OOM killer; Wait killed what was left
				return nil, fmt.Errorf("%w before it said whether %q started (it may have run)", err, spec.Args[0])
			}
			return nil, notSupervisor(spec, err)
		}
	case <-ctx.Done():
		return fail(fmt.Errorf("supervisor: start: %w", context.Cause(ctx)))
	}
	answered = true
	switch st.verb {
	case "pid":
		var start uint64
		n, err := fmt.Sscan(st.rest, &p.childPid, &start)
		if n == 0 {
			return fail(fmt.Errorf("supervisor: malformed status %q: %w", st.rest, err))
		}
		if n == 2 {
			p.orphans.track(p.childPid, start)
		}
		return p, nil
	case "deadline":
		return fail(fmt.Errorf("%w before %q could start", ErrDeadline, spec.Args[0]))
	case "err":
		kind, msg, _ := strings.Cut(st.rest, " ")
		return fail(fmt.Errorf("supervisor: start %q: %w", spec.Args[0], &remoteError{msg: msg, kind: kind}))
	}
	return fail(fmt.Errorf("supervisor: unexpected status %q", st.verb+" "+st.rest))
}

// newCgroup makes the run's cgroup in spec.Cgroups, if any.
func newCgroup(spec Spec) (string, error) {
	if spec.Cgroups == nil {
		return "", nil
	}
	name := spec.Name
	if name == "" {
		name = filepath.Base(spec.Args[0])
	}
	dir, err := spec.Cgroups.New(name)
	if err != nil {
		return "", fmt.Errorf("supervisor: the run's cgroup: %w", err)
	}
	return dir, nil
}

// abortTimeout bounds how long a failed Start waits for a supervisor that
// answered to stop the child's group before it kills the supervisor.
const abortTimeout = 5 * time.Second

// abort ends a supervisor whose start failed, and waits for it: the child,
// if it started already, and every process below it are killed at once. A
// supervisor that answered is asked to; one that did not (stuck, stopped
// before it reported the child's pid) is killed with its tree (Kill).
func (p *Process) abort(answered bool) {
	if answered {
		_ = p.send("s 0\n")
		p.closeControl()
		select {
		case <-p.done:
		case <-time.After(abortTimeout):
			_ = p.Kill()
		}
	} else {
		p.closeControl()
		_ = p.Kill()
	}
	_, _ = p.Wait()
}

// closeControl closes the control pipe: the supervisor stops the child
// (with Spec.Grace) when it reads EOF.
func (p *Process) closeControl() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctl != nil {
		p.ctl.Close()
		p.ctl = nil
	}
}

// notSupervisor is the error for a Spec.Path that exited without reading
// its request or saying whether the child started.
func notSupervisor(spec Spec, err error) error {
	msg := fmt.Sprintf("supervisor: %s exited before starting %q: is it baton, calling supervisor.MaybeRun first?", spec.Path, spec.Args[0])
	if err == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// readStatus reads status lines until the supervisor exits.
func (p *Process) readStatus() {
	defer close(p.statusDone)
	defer p.status.Close()
	sc := bufio.NewScanner(p.status)
	sent := false
	for sc.Scan() {
		verb, rest, _ := strings.Cut(sc.Text(), " ")
		if verb == "deadline" {
			p.hit.Store(true)
		}
		if !sent {
			sent = true
			p.first <- statusLine{verb, rest}
		}
	}
}

// Pid returns the supervisor's process id.
func (p *Process) Pid() int { return p.pid }

// ChildPid returns the child's process id, which is also its process group
// id.
func (p *Process) ChildPid() int { return p.childPid }

// Cgroup returns the directory of the run's cgroup, "" for none.
func (p *Process) Cgroup() string { return p.cgroup }

// Extend tells the supervisor the new validity deadline. A later one
// re-arms its timers; an earlier one is honoured too; the zero time removes
// the deadline. Once the deadline's SIGTERM went out, a later deadline only
// postpones the SIGKILL. Extend returns an error wrapping ErrDone after the
// supervisor exited, and another error if the supervisor did not take the
// message within a second.
func (p *Process) Extend(deadline time.Time) error {
	return p.send(fmt.Sprintf("d %d\n", toMono(deadline)))
}

// Stop asks the supervisor to send SIGTERM to the child's process group now
// and SIGKILL after grace (or at the deadline's SIGKILL, if that is
// earlier). It does not wait; use Wait. If the supervisor cannot be told,
// it is sent SIGTERM, which stops the child with Spec.Grace. After the
// supervisor exited Stop returns an error wrapping ErrDone.
func (p *Process) Stop(grace time.Duration) error {
	err := p.send(fmt.Sprintf("s %d\n", max(grace, 0)))
	if err != nil && !errors.Is(err, ErrDone) {
		if serr := p.cmd.Process.Signal(syscall.SIGTERM); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return err
}

// Signal asks the supervisor to send sig to the child's process group (the
// supervisor knows when the group is gone, so a reused process group id is
// never hit). It returns an error wrapping ErrDone after the supervisor
// exited.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.send(fmt.Sprintf("k %d\n", int(sig)))
}

// Kill kills the supervisor with SIGKILL, and every process below it (the
// child's parent-death signal alone would spare the processes it started):
// it stops the supervisor, so that it starts nothing more, then stops and
// kills its descendants, wherever they moved (setsid), then the supervisor.
// It is the last resort for a supervisor that does not react to Stop, and
// works before the supervisor reported the child's pid too.
func (p *Process) Kill() error {
	p.reapMu.Lock()
	if !p.reaped {
		_ = stopProcess(p.cmd.Process)
		killTree(p.pid, p.orphans)
	}
	p.reapMu.Unlock()
	err := p.cmd.Process.Kill()
	p.killGroup()
	if errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%w", ErrDone)
	}
	return err
}

func (p *Process) send(line string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return fmt.Errorf("%w (pid %d)", ErrDone, p.pid)
	default:
	}
	if p.ctl == nil {
		return fmt.Errorf("%w (pid %d)", ErrDone, p.pid)
	}
	_ = p.ctl.SetWriteDeadline(time.Now().Add(controlTimeout))
	if _, err := io.WriteString(p.ctl, line); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("%w (pid %d)", ErrDone, p.pid)
		}
		return fmt.Errorf("supervisor: control pipe of pid %d: %w", p.pid, err)
	}
	return nil
}

// Wait waits for the supervisor to exit and returns its exit status: the
// child's exit code, or 128+n if the child died of signal n. If the
// supervisor signalled the child because the deadline passed, Wait returns
// ExitDeadline and an error wrapping ErrDeadline. If the supervisor itself
// failed or was killed, the error says so (the code is then -1 if it died of
// a signal). Wait may be called more than once, also concurrently.
func (p *Process) Wait() (exitCode int, err error) {
	p.waitOnce.Do(func() {
		<-p.done
		// The status pipe ends with the supervisor (its child does not
		// inherit it); bound the wait all the same.
		select {
		case <-p.statusDone:
		case <-time.After(waitDelay):
			p.status.Close()
			<-p.statusDone
		}
		p.closeControl()
		p.code, p.err = p.result()
		if p.cgErr != nil {
			p.err = errors.Join(p.err, fmt.Errorf("supervisor: %w", p.cgErr))
		}
	})
	return p.code, p.err
}

func (p *Process) result() (int, error) {
	st := p.cmd.ProcessState
	if st == nil {
		return -1, fmt.Errorf("supervisor: wait for pid %d: %w", p.pid, p.waitErr)
	}
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) && !errors.Is(p.waitErr, exec.ErrWaitDelay) {
		return -1, fmt.Errorf("supervisor: wait for pid %d: %w", p.pid, p.waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, fmt.Errorf("supervisor: pid %d died of signal %v", p.pid, ws.Signal())
	}
	code := st.ExitCode()
	if code == ExitDeadline && p.hit.Load() {
		return code, fmt.Errorf("%w: the supervisor killed %d's process group", ErrDeadline, p.childPid)
	}
	return code, nil
}

// KilledByDeadline reports whether the supervisor signalled the child
// because the validity deadline passed. It is final once Wait returned.
func (p *Process) KilledByDeadline() bool { return p.hit.Load() }

// remoteError is the supervisor's report that the child could not start.
type remoteError struct {
	msg, kind string
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Unwrap() error {
	switch e.kind {
	case errKindNotFound:
		return exec.ErrNotFound
	case errKindPerm:
		return fs.ErrPermission
	}
	return nil
}

// killGroup kills the child's process group with SIGKILL (its id is the
// child's pid: the supervisor starts the child in a group of its own).
func (p *Process) killGroup() {
	if pid := p.childPid; pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// Lease is what starting a child under a lease needs of it: its deadline,
// which extensions move, and whether it ended.
type Lease interface {
	Deadline() time.Time
	Done() <-chan struct{}
}

// MaxLeaseStarts bounds the starts of StartUnder.
const MaxLeaseStarts = 3

// ErrLeaseTooShort marks a StartUnder whose every start found the lease's
// time left too short to start the child under, while the lease was
// extended meanwhile: a ttl shorter than a start takes on this host. It
// wraps ErrDeadline.
var ErrLeaseTooShort = fmt.Errorf("%w: the lease's ttl is shorter than a start takes here", ErrDeadline)

// StartUnder starts spec's supervisor with the deadline of lease and
// returns it with that deadline. A lease extended while the supervisor
// started (slow to start on a busy host) has not run out: the deadline the
// supervisor refused is not the lease's any more, so it starts again under
// the lease's, until it starts, the lease ends or is not extended, or
// MaxLeaseStarts starts were refused (an error wrapping ErrLeaseTooShort:
// started again for as long as the lease is held, it would run nothing).
func StartUnder(ctx context.Context, lease Lease, spec Spec) (*Process, time.Time, error) {
	spec.Deadline = lease.Deadline()
	p, err := Start(ctx, spec)
	for starts := 1; errors.Is(err, ErrDeadline) && ctx.Err() == nil && extendedPast(lease, spec.Deadline); starts++ {
		if starts == MaxLeaseStarts {
			return nil, spec.Deadline, fmt.Errorf("%w (%d starts of %q, the last: %w)", ErrLeaseTooShort, starts, spec.Args[0], err)
		}
		spec.Deadline = lease.Deadline()
		p, err = Start(ctx, spec)
	}
	return p, spec.Deadline, err
}

// extendedPast reports whether lease still runs with a deadline after was.
func extendedPast(lease Lease, was time.Time) bool {
	select {
	case <-lease.Done():
		return false
	default:
		return lease.Deadline().After(was)
	}
}
