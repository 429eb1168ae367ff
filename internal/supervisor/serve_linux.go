package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/runcgroup"
)

// Main runs the supervisor (see the package documentation) and exits with
// its exit status; it never returns. It is meant for a process started by Start; run by hand,
// it finds no pipes and exits with ExitFailure.
func Main() {
	os.Exit(serve())
}

// serve is the supervisor. It returns its exit status. In order: catch the
// signals that must not kill it, open the pipes, become a child subreaper,
// read the request, start the child (none once the deadline has passed),
// report the child's pid, and supervise it until it exits.
func serve() int {
	term := catchSignals()
	status, ctl := openPipes()
	report := func(line string) { _, _ = io.WriteString(status, line+"\n") }
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "baton supervisor: cannot become a child subreaper: %v\n", err)
		return ExitFailure
	}

	rd := bufio.NewReader(ctl)
	req, err := readRequest(rd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton supervisor: %v (this mode is for baton's own use)\n", err)
		return ExitFailure
	}
	if req.expired(monoNow()) {
		report("deadline") // never start a child without a lease
		return ExitDeadline
	}

	c, err := startChild(req.Argv, req.Mark, req.Cgroup)
	if err != nil {
		report("err " + errKind(err) + " " + strings.ReplaceAll(err.Error(), "\n", " "))
		return ExitFailure
	}
	if beforeReport != nil {
		beforeReport()
	}
	report(fmt.Sprintf("pid %d %d", c.pid, c.start))
	return supervise(c, req, rd, term, report)
}

// catchSignals catches, rather than ignores, what must not kill the
// supervisor: an ignored disposition would be inherited by the child, a
// caught one is not. SIGINT and SIGHUP reach baton's terminal process
// group; baton decides what its runs do then. SIGPIPE: writes to a closed
// stderr or status pipe fail instead of killing the supervisor. It returns
// the channel SIGTERM (the parent-death signal, or someone's kill) arrives
// on.
func catchSignals() <-chan os.Signal {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	return term
}

// openPipes opens the status and control pipes, and marks them and every
// other inherited descriptor above stderr close-on-exec: the child
// inherits none of them (the parent reads EOF on the status pipe when the
// supervisor exits).
func openPipes() (status, ctl *os.File) {
	status = os.NewFile(statusFD, "baton-supervisor-status")
	ctl = os.NewFile(ctlFD, "baton-supervisor-control")
	unix.CloseOnExec(statusFD)
	unix.CloseOnExec(ctlFD)
	closeInheritedOnExec()
	return status, ctl
}

// readRequest reads the request, the first line of the control pipe. An
// unreadable line and an empty argv are errors.
func readRequest(rd *bufio.Reader) (request, error) {
	line, err := rd.ReadBytes('\n')
	var req request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err == nil && len(req.Argv) == 0 {
		err = errors.New("empty argv")
	}
	return req, err
}

// expired tells whether the request's deadline, less its margin, has
// passed at now (CLOCK_BOOTTIME ns): then no child is started.
func (r request) expired(now int64) bool {
	return r.Deadline != 0 && now >= r.Deadline-r.Margin
}

// supervise watches the started child until it exits and returns the
// supervisor's exit status (child.exitStatus). Each turn it first sends
// the signals its watchdog has due (reporting "deadline" the first time a
// deadline rather than a stop caused one), then waits for the first of:
// the child's exit; a control line (control), or the control pipe's EOF
// (baton died or gave up on us: a stop with the request's grace); SIGTERM
// (the same stop); SIGCHLD (orphans of the job reparented here are reaped
// as they exit); the watchdog's next signal coming due.
func supervise(c *child, req request, rd *bufio.Reader, term <-chan os.Signal, report func(string)) int {
	msgs := make(chan [2]int64) // verb ('d', 's' or 'k'), value
	go readControl(rd, msgs)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)

	w := newWatchdog(req.Deadline, req.Grace, req.Margin, monoNow())
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := monoNow()
		for _, d := range w.due(now) {
			c.stop(d.sig)
			if d.deadline {
				report("deadline")
			}
		}
		fire := wakeAt(timer, w.next(), now)
		select {
		case <-c.done:
			return c.exitStatus(w.hit, req.Quiet)
		case m, ok := <-msgs:
			if ok {
				control(w, c, m)
			} else { // baton died or gave up on us
				msgs = nil
				w.stop(monoNow(), req.Grace)
			}
		case <-term: // parent-death signal, or someone's kill
			w.stop(monoNow(), req.Grace)
		case <-chld:
			reapZombies(c.pid)
		case <-fire:
		}
	}
}

// bootPoll is how long the supervisor waits at most before it looks at the
// clock again while a signal is still to come. Go's timers run on
// CLOCK_MONOTONIC, which stops while the host is suspended; the deadline
// is on CLOCK_BOOTTIME, which does not.
const bootPoll = 100 * time.Millisecond

// wakeAt resets timer to fire at next (CLOCK_BOOTTIME ns; now is now), or
// bootPoll from now if that is sooner, and returns its channel; nil, which
// never fires, when next is never.
func wakeAt(timer *time.Timer, next, now int64) <-chan time.Time {
	if next == never {
		return nil
	}
	timer.Reset(min(time.Duration(next-now), bootPoll))
	return timer.C
}

// control carries out one control line: 'd' moves the watchdog's deadline
// (0: none), 's' stops the child with the given grace (ns, at least 0),
// 'k' sends the given signal to the child's process group.
func control(w *watchdog, c *child, m [2]int64) {
	switch m[0] {
	case 'd':
		w.extend(m[1], monoNow())
	case 's':
		w.stop(monoNow(), max(m[1], 0))
	case 'k':
		c.signal(syscall.Signal(m[1]))
	}
}

// readControl sends deadline and stop requests to msgs and closes it at EOF
// or on a malformed line (either way the parent is gone for us).
func readControl(rd *bufio.Reader, msgs chan<- [2]int64) {
	defer close(msgs)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		verb, n, err := parseLine(strings.TrimSuffix(line, "\n"))
		if err != nil || (verb != "d" && verb != "s" && verb != "k") || verb == "k" && (n <= 0 || n > 64) {
			fmt.Fprintf(os.Stderr, "baton supervisor: malformed control line %q\n", line)
			return
		}
		msgs <- [2]int64{int64(verb[0]), n}
	}
}

func errKind(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return errKindNotFound
	case errors.Is(err, fs.ErrPermission):
		return errKindPerm
	}
	return errKindOther
}

// child is the supervised process.
type child struct {
	pid    int
	start  uint64        // start time, from /proc: the pid's identity
	cgroup string        // the run's cgroup, "" for none
	noted  chan struct{} // closed once start is read: the child may be reaped
	done   chan struct{} // closed once reaped
	state  *os.ProcessState

	mu     sync.Mutex
	reaped bool // the pid, and with it the process group id, may be reused
}

// startChild starts argv in its own process group with a parent-death
// SIGKILL, in the cgroup v2 directory cgroup unless that is "". The forking
// goroutine stays locked to its thread until the child has exited: the
// parent-death signal fires when that thread ends.
func startChild(argv []string, mark, cgroup string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = childEnv(os.Environ())
	if mark != "" {
		cmd.Env = append(cmd.Env, TreeEnv+"="+mark)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cgroup != "" {
		// clone3 with CLONE_INTO_CGROUP: the child is born in the cgroup
		fd, err := unix.Open(cgroup, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("the run's cgroup: %w", err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	c := &child{done: make(chan struct{}), noted: make(chan struct{}), cgroup: cgroup}
	err := StartLocked(cmd, func() {
		pid := cmd.Process.Pid
		// Wait without reaping: while the child is a zombie its pid is
		// still the group's id, so the final sweep cannot hit a stranger.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		c.mu.Lock()
		_ = syscall.Kill(-pid, syscall.SIGKILL) // what the job left behind
		c.reaped = true
		c.mu.Unlock()
		sweep(time.Second) // and what left the group (setsid)
		c.killCgroup()     // and what else is in the run's cgroup
		<-c.noted
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		reapOrphans(time.Second)
		close(c.done)
	})
	if err != nil {
		return nil, err
	}
	c.pid = cmd.Process.Pid
	st, _ := readStat(c.pid) // unreaped until noted: a zombie's stat at worst
	c.start = st.start
	close(c.noted)
	return c, nil
}

// signal sends sig to the child's process group unless the child has been
// reaped.
func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		_ = syscall.Kill(-c.pid, sig)
	}
}

// stop sends sig to the child's process group, as signal does, and to
// every other descendant of the supervisor: a process that left the group
// with setsid() does not escape the end of the run. A SIGKILL goes to
// every process in the run's cgroup too, forks in flight included.
func (c *child) stop(sig syscall.Signal) {
	c.signal(sig)
	signalDescendants(sig)
	if sig == syscall.SIGKILL {
		c.killCgroup()
	}
}

// killCgroup kills every process in the run's cgroup, if it has one.
func (c *child) killCgroup() {
	if c.cgroup != "" {
		_, _ = runcgroup.Kill(c.cgroup, nil)
	}
}

// exitStatus is the supervisor's exit status once the child has been
// reaped: ExitDeadline if a deadline signalled it (hit), after one line on
// stderr unless quiet; 128+n if it died of signal n; else its exit code.
func (c *child) exitStatus(hit, quiet bool) int {
	if hit {
		if !quiet {
			fmt.Fprintf(os.Stderr, "baton supervisor: killed process group %d: lease validity deadline passed\n", c.pid)
		}
		return ExitDeadline
	}
	ws, _ := c.state.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// childEnv is env without EnvVar, so a child that is baton (or a test
// binary) does not take itself for a supervisor, and without TreeEnv (of a
// run this process belongs to): the child gets its own run's.
func childEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvVar+"=") && !strings.HasPrefix(kv, TreeEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec:
// whatever baton inherited without the flag (a parent's leak, a socket) is
// not passed on to the child.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
