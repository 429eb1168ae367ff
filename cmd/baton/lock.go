package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/childenv"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/supervisor"
	"github.com/batonhq/baton/locking"
)

// Exit statuses of "baton lock". Apart from the codes below, baton exits with
// CMD's own status, so a crontab sees the job's result:
//
//	0..255  CMD's exit status (128+N when CMD was killed by signal N)
//	2       usage or configuration error; nothing was run
//	69      EX_UNAVAILABLE: too few Redis masters answered; nothing was run
//	75      EX_TEMPFAIL: the lock is held by another process; nothing was run
//	76      the lock was lost while CMD ran; CMD was stopped (SIGTERM, then
//	        SIGKILL after --grace)
//	126     CMD was found but could not be executed (the lock was released)
//	127     CMD was not found (the lock was released)
//
// If baton receives a signal while it waits for the lock it gives up and
// exits 128+N. The sysexits(3) codes 69 and 75 and the shell's 126 and 127
// can also be CMD's own status; check stderr to tell them apart.
const (
	exitUsage       = 2   // bad flags, arguments, URL or config file
	exitUnavailable = 69  // Redis masters unreachable (EX_UNAVAILABLE)
	exitBusy        = 75  // lock held elsewhere (EX_TEMPFAIL)
	exitLockLost    = 76  // lock lost while CMD ran
	exitCannotExec  = 126 // CMD found but not executable
	exitNotFound    = 127 // CMD not found
)

// forwardedSignals are relayed to CMD's process group.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// lockRun is one invocation of "baton lock".
type lockRun struct {
	cfg     lockConfig
	stdout  io.Writer
	stderr  io.Writer // serialised; our own messages go here
	child   io.Writer // CMD's stderr: the caller's file, or stderr when not a file
	secrets []string  // passwords to scrub from every message
}

// lockCommand is "baton lock [flags] KEY [flags] -- CMD [ARGS]": the flags
// end at "--", everything after it is CMD's, flags included.
func (c *cli) lockCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "lock",
		Long:              lockHelp,
		Annotations:       map[string]string{helpAnnotation: "lock"},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	lf := defineLock(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := lf.finish(cmd.Flags(), args, cmd.ArgsLenAtDash())
		c.code = runLock(cfg, err, c.stdout, c.stderr)
		return nil
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		msg := flagErrorText(cmd.Flags(), "lock", err, otherFlags(cmd))
		return &flagError{msg: userinfoPassword.ReplaceAllString(msg, "${1}xxxxx@")}
	})
	return cmd
}

// runLock implements "baton lock" with the parsed command line cfg, or the
// usage error err; see lockHelp.
func runLock(cfg lockConfig, err error, stdout, stderr io.Writer) int {
	sw := &syncWriter{w: stderr}
	r := &lockRun{stdout: stdout, stderr: sw, child: sw}
	if _, ok := stderr.(*os.File); ok {
		r.child = stderr // pass the real file through: CMD may check isatty
	}
	if err != nil {
		return r.usage(err)
	}
	r.cfg = cfg
	for _, m := range cfg.masters {
		if p := m.opts.Password; len(p) >= 3 {
			r.secrets = append(r.secrets, p)
		}
	}
	for _, v := range cfg.secrets {
		if len(v) >= redact.MinSubstring {
			r.secrets = append(r.secrets, v)
		}
	}
	return r.lockAndRun()
}

// lockAndRun takes the lock, runs CMD under it and returns the exit status.
func (r *lockRun) lockAndRun() int {
	cfg := r.cfg
	rdbs := make([]redis.UniversalClient, len(cfg.masters))
	for i, m := range cfg.masters {
		rdbs[i] = redis.NewClient(m.opts)
	}
	defer func() {
		for _, rdb := range rdbs {
			_ = rdb.Close()
		}
	}()
	logger := slog.New(lockLog{r: r})
	var fresh locking.Option
	if cfg.fresh {
		fresh = locking.WithFreshDeployment()
		logger.Warn("--fresh-deployment (or locking.fresh_deployment) is on: masters that carry no marker grant at once, so if every master restarts empty at once a lock still held is granted again; restart safety is given up while it stays on. Mark a brand-new set once with `baton init --redis URL` (or --config FILE) instead")
	}
	client, err := locking.NewQuorum(rdbs, locking.WithPrefix(cfg.prefix), locking.WithLogger(logger),
		locking.WithRestartQuarantine(cfg.quarantine), fresh)
	if err != nil {
		return r.usage(err)
	}
	defer client.Close()

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	lease, code, ok := r.acquire(client, sigs)
	if !ok {
		return code
	}
	return r.supervise(lease, sigs)
}

// acquire takes the lock. ok is false when it was not taken; code is then
// the exit status.
func (r *lockRun) acquire(client *locking.Client, sigs <-chan os.Signal) (lease *locking.Lease, code int, ok bool) {
	cfg := r.cfg
	var opts []locking.LockOption
	if cfg.fair {
		opts = append(opts, locking.WithFair())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lease *locking.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		switch {
		case cfg.max > 1:
			sem, err := client.Semaphore(cfg.key, cfg.max)
			if cfg.fair {
				sem, err = client.FairSemaphore(cfg.key, cfg.max)
			}
			if err != nil {
				res.err = err
				break
			}
			if cfg.wait == 0 {
				res.lease, res.err = sem.TryAcquire(ctx, cfg.ttl)
				break
			}
			wctx, wcancel := context.WithTimeout(ctx, cfg.wait)
			res.lease, res.err = sem.Acquire(wctx, cfg.ttl)
			wcancel()
		case cfg.shared || cfg.excl:
			rw, err := client.RWMutex(cfg.key)
			if err != nil {
				res.err = err
				break
			}
			try, wait := rw.TryLock, rw.Lock
			if cfg.shared {
				try, wait = rw.TryRLock, rw.RLock
			}
			if cfg.wait == 0 {
				res.lease, res.err = try(ctx, cfg.ttl)
				break
			}
			wctx, wcancel := context.WithTimeout(ctx, cfg.wait)
			res.lease, res.err = wait(wctx, cfg.ttl)
			wcancel()
		case cfg.wait == 0:
			res.lease, res.err = client.TryLock(ctx, cfg.key, cfg.ttl, opts...)
		default:
			wctx, wcancel := context.WithTimeout(ctx, cfg.wait)
			res.lease, res.err = client.Lock(wctx, cfg.key, cfg.ttl, opts...)
			wcancel()
		}
		done <- res
	}()

	var res result
	select {
	case res = <-done:
	case sig := <-sigs:
		cancel()
		res = <-done
		if res.lease != nil {
			r.release(res.lease)
		}
		r.printf("interrupted by %v while taking lock %q", sig, cfg.key)
		return nil, 128 + signum(sig), false
	}
	if res.err == nil {
		return res.lease, 0, true
	}
	err := res.err
	if errors.Is(err, locking.ErrInvalid) {
		return nil, r.usage(err), false
	}
	var oe *locking.ObtainError
	if !errors.As(err, &oe) {
		r.printf("cannot take lock %q: %v", cfg.key, err)
		return nil, exitUnavailable, false
	}
	var down []locking.MasterError
	for _, f := range oe.Failures {
		if !isBusy(f) {
			down = append(down, f)
		}
	}
	if errors.Is(err, locking.ErrNotObtained) && !oe.Expired && len(cfg.masters)-len(down) >= oe.Quorum {
		r.printf("%q is held by another process (waited %v)", cfg.key, cfg.wait)
		return nil, exitBusy, false
	}
	if len(down) == 0 { // validity used up on the way: masters too slow
		r.printf("cannot take lock %q: %v", cfg.key, err)
		return nil, exitUnavailable, false
	}
	parts := make([]string, len(down))
	for i, f := range down {
		parts[i] = fmt.Sprintf("%s: %v", r.masterName(f), f.Err)
	}
	if len(cfg.masters) == 1 {
		r.printf("cannot take lock %q: Redis master %s unavailable: %v", cfg.key, r.masterName(down[0]), down[0].Err)
	} else {
		r.printf("cannot take lock %q: %d of %d Redis masters failed, %d must answer: %s",
			cfg.key, len(down), len(cfg.masters), oe.Quorum, strings.Join(parts, "; "))
	}
	return nil, exitUnavailable, false
}

// isBusy reports whether one master's failure means "held by someone else".
// The library keeps that sentinel unexported; an ObtainError made of this
// failure alone wraps ErrNotObtained exactly when it is.
func isBusy(f locking.MasterError) bool {
	return errors.Is(&locking.ObtainError{Failures: []locking.MasterError{f}}, locking.ErrNotObtained)
}

// masterName names the master of a failure by its redacted URL.
func (r *lockRun) masterName(f locking.MasterError) string {
	if f.Index >= 0 && f.Index < len(r.cfg.masters) {
		return redact.URL(r.cfg.masters[f.Index].raw)
	}
	return f.Addr
}

// supervise runs CMD under the lease and returns baton's exit status. CMD
// runs under baton's supervisor process, as exec jobs do: the supervisor
// knows the lease's validity deadline (forwarded after every extension) and
// stops CMD's process group on its own before the deadline (SIGTERM, then
// SIGKILL at the deadline), so CMD never outlives the lock, even when this
// process is frozen and cannot react.
func (r *lockRun) supervise(lease *locking.Lease, sigs <-chan os.Signal) int {
	cfg := r.cfg
	p, deadline, err := supervisor.StartUnder(context.Background(), lease, supervisor.Spec{
		Args: cfg.argv,
		Env: append(childenv.Filter(os.Environ(), cfg.inherit),
			envLockKey+"="+cfg.key,
			envFencingToken+"="+strconv.FormatInt(lease.Fence(), 10)),
		Stdin:  os.Stdin,
		Stdout: r.stdout,
		Stderr: r.child,
		Grace:  cfg.grace,
		// a short lease needs a short margin, or the supervisor's SIGTERM
		// (no earlier than half the time left) would beat the regular
		// extension at a third of the ttl
		Margin: min(supervisor.DefaultMargin, cfg.ttl/20),
		Quiet:  true,
	})
	if err != nil {
		code := exitCannotExec
		switch {
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
			code = exitNotFound
		case errors.Is(err, supervisor.ErrDeadline):
			r.printf("lock %q lost before %q could start: %v", cfg.key, cfg.argv[0], err)
			r.release(lease)
			return exitLockLost
		case errors.Is(err, errors.ErrUnsupported):
			code = exitUsage
		}
		r.printf("cannot run %q: %v", cfg.argv[0], err)
		r.release(lease)
		return code
	}

	type result struct {
		code int
		err  error
	}
	exited := make(chan result, 1)
	go func() {
		code, err := p.Wait()
		exited <- result{code, err}
	}()
	var (
		lost      bool
		leaseDone = lease.Done()
		poll      = time.NewTimer(r.deadlinePoll())
		escalate  <-chan time.Time
		res       result
	)
	defer poll.Stop()
wait:
	for {
		select {
		case res = <-exited:
			break wait
		case sig := <-sigs:
			if err := p.Signal(sig.(syscall.Signal)); err != nil && !errors.Is(err, supervisor.ErrDone) {
				r.printf("cannot forward %v to the command: %v", sig, err)
			}
		case <-poll.C:
			if d := lease.Deadline(); !d.Equal(deadline) {
				deadline = d
				if err := p.Extend(d); err != nil && !errors.Is(err, supervisor.ErrDone) {
					r.printf("cannot tell the supervisor the lease's new deadline: %v", err)
				}
			}
			poll.Reset(r.deadlinePoll())
		case <-leaseDone:
			leaseDone = nil
			reason := lease.Err()
			if errors.Is(reason, locking.ErrReleased) {
				continue // cannot happen: only we release, after CMD
			}
			lost = true
			r.printf("lock %q lost: %v; stopping command", cfg.key, reason)
			if err := p.Stop(cfg.grace); err != nil && !errors.Is(err, supervisor.ErrDone) {
				r.printf("cannot stop the command: %v", err)
			}
			escalate = time.After(cfg.grace + 2*time.Second)
		case <-escalate:
			escalate = nil
			_ = p.Kill() // the supervisor did not act on Stop: the group goes too
		}
	}
	if errors.Is(res.err, supervisor.ErrDeadline) && !lost {
		// the supervisor acted before this process saw the lease end
		lost = true
		r.printf("lock %q lost: its validity ran out; the supervisor stopped the command", cfg.key)
	}
	if lost {
		return exitLockLost
	}
	if res.err != nil {
		r.printf("supervising %q: %v", cfg.argv[0], res.err)
		r.release(lease)
		return exitCannotExec
	}
	r.release(lease)
	return res.code
}

// deadlinePoll is how often the lease's deadline is re-read and forwarded
// to the supervisor: a fiftieth of the ttl, within [2ms, 200ms], so an
// extension reaches the supervisor well before the half-time SIGTERM.
func (r *lockRun) deadlinePoll() time.Duration {
	return min(max(r.cfg.ttl/50, 2*time.Millisecond), 200*time.Millisecond)
}

// release gives the lock back, token-checked, and warns when it had been lost.
func (r *lockRun) release(lease *locking.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := lease.Release(ctx)
	switch {
	case err == nil:
	case errors.Is(err, locking.ErrNotHeld):
		r.printf("warning: lock %q had been lost before the command finished: %v", r.cfg.key, err)
	default:
		r.printf("warning: releasing lock %q: %v (it expires within %v)", r.cfg.key, err, r.cfg.ttl)
	}
}

// exitStatus is the shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signum returns a signal's number.
func signum(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 1
}

// usage reports a usage or configuration error and returns exitUsage.
func (r *lockRun) usage(err error) int {
	r.printf("%v", err)
	fmt.Fprintln(r.stderr, lockUsageLine)
	return exitUsage
}

// printf writes one line "baton lock: ..." to stderr, passwords scrubbed,
// made inert as the other commands' lines are (see the package's printf):
// lock names, holders and Redis errors are others' text.
func (r *lockRun) printf(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	printf(r.stderr, "%s\n", r.scrub("baton lock: "+msg))
}

// userinfoPassword matches the password part of scheme://user:password@.
var userinfoPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@`)

// scrub removes passwords from a message: in URLs, and any known one.
func (r *lockRun) scrub(s string) string {
	s = userinfoPassword.ReplaceAllString(s, "${1}xxxxx@")
	for _, p := range r.secrets {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// syncWriter serialises writes: CMD's output copier and baton's own messages
// may write at the same time when stderr is not a file.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p under the lock.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// lockLog writes the lock library's warnings as "baton lock: ..." lines to
// stderr, passwords scrubbed (its Info reports are left out).
type lockLog struct {
	r     *lockRun
	attrs []slog.Attr
}

func (lockLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h lockLog) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.r.printf("%s", b.String())
	return nil
}

func (h lockLog) WithAttrs(as []slog.Attr) slog.Handler {
	return lockLog{h.r, append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h lockLog) WithGroup(string) slog.Handler { return h }
