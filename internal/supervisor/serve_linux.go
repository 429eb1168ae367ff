package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
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

const never = math.MaxInt64

// serve is the supervisor. It returns its exit status.
func serve() int {
	// Catch, rather than ignore, what must not kill us: an ignored
	// disposition would be inherited by the child, a caught one is not.
	// SIGINT and SIGHUP reach baton's terminal process group; baton decides
	// what its runs do then. SIGPIPE: writes to a closed stderr or status
	// pipe fail instead of killing us.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)

	status := os.NewFile(statusFD, "baton-supervisor-status")
	ctl := os.NewFile(ctlFD, "baton-supervisor-control")
	// The child must not inherit the pipes: the parent reads EOF on the
	// status pipe when the supervisor exits.
	unix.CloseOnExec(statusFD)
	unix.CloseOnExec(ctlFD)
	closeInheritedOnExec()
	report := func(line string) { _, _ = io.WriteString(status, line+"\n") }
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "baton supervisor: cannot become a child subreaper: %v\n", err)
		return ExitFailure
	}

	rd := bufio.NewReader(ctl)
	line, err := rd.ReadBytes('\n')
	var req request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err == nil && len(req.Argv) == 0 {
		err = errors.New("empty argv")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton supervisor: %v (this mode is for baton's own use)\n", err)
		return ExitFailure
	}
	grace, margin := req.Grace, req.Margin
	if req.Deadline != 0 && monoNow() >= req.Deadline-margin {
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

	msgs := make(chan [2]int64) // verb ('d', 's' or 'k'), value
	go readControl(rd, msgs)
	// orphans of the job reparented here are reaped as they exit
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)

	var (
		deadline           = req.Deadline
		dTerm, dKill int64 = never, never // from the deadline
		sTerm, sKill int64 = never, never // from a stop
		termSent     bool
		killSent     bool
		hit          bool // a deadline timer signalled the child
	)
	arm := func(now int64) {
		if deadline == 0 {
			dTerm, dKill = never, never
			return
		}
		dKill = deadline - margin
		// The grace must fit: with a short lease, TERM at half the time
		// left, so that a regular extension still arrives before it.
		g := grace
		if half := (dKill - now) / 2; half < g {
			g = max(half, 0)
		}
		dTerm = dKill - g
	}
	stop := func(now, g int64) {
		sTerm = min(sTerm, now)
		sKill = min(sKill, now+g)
	}
	arm(monoNow())
	const bootPoll = 100 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := monoNow()
		if !termSent && now >= min(dTerm, sTerm) {
			termSent = true
			c.stop(syscall.SIGTERM)
			if now >= dTerm && !hit {
				hit = true
				report("deadline")
			}
		}
		if !killSent && now >= min(dKill, sKill) {
			killSent = true
			c.stop(syscall.SIGKILL)
			if now >= dKill && !hit {
				hit = true
				report("deadline")
			}
		}
		next := int64(never)
		if !termSent {
			next = min(dTerm, sTerm)
		}
		if !killSent {
			next = min(next, dKill, sKill)
		}
		var fire <-chan time.Time
		if next != never {
			// Go's timers run on CLOCK_MONOTONIC, which stops while the
			// host is suspended; the deadline is on CLOCK_BOOTTIME, which
			// does not: look at the clock at least every bootPoll
			timer.Reset(min(time.Duration(next-now), bootPoll))
			fire = timer.C
		}
		select {
		case <-c.done:
			if hit {
				if !req.Quiet {
					fmt.Fprintf(os.Stderr, "baton supervisor: killed process group %d: lease validity deadline passed\n", c.pid)
				}
				return ExitDeadline
			}
			ws, _ := c.state.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		case m, ok := <-msgs:
			switch {
			case !ok: // baton died or gave up on us
				msgs = nil
				stop(monoNow(), grace)
			case m[0] == 'd':
				deadline = m[1]
				arm(monoNow())
			case m[0] == 's':
				stop(monoNow(), max(m[1], 0))
			case m[0] == 'k':
				c.signal(syscall.Signal(m[1]))
			}
		case <-term: // parent-death signal, or someone's kill
			stop(monoNow(), grace)
		case <-chld:
			reapZombies(c.pid)
		case <-fire:
		}
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
