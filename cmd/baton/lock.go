package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/url"
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

	"github.com/batonhq/baton/internal/childenv"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/supervisor"
	"github.com/batonhq/baton/jobs"
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
	ExitUsage       = 2   // bad flags, arguments, URL or config file
	ExitUnavailable = 69  // Redis masters unreachable (EX_UNAVAILABLE)
	ExitBusy        = 75  // lock held elsewhere (EX_TEMPFAIL)
	ExitLockLost    = 76  // lock lost while CMD ran
	ExitCannotExec  = 126 // CMD found but not executable
	ExitNotFound    = 127 // CMD not found
)

// Defaults of "baton lock".
const (
	defaultRedisURL = "redis://127.0.0.1:6379/0"
	defaultTTL      = 30 * time.Second
	defaultGrace    = 10 * time.Second
	defaultPrefix   = "baton:lock:"
	releaseTimeout  = 5 * time.Second
	envRedisURL     = "BATON_REDIS_URL"
	envRedisAuth    = "REDISCLI_AUTH"
	envLockKey      = "BATON_LOCK_KEY"
	envFencingToken = "BATON_FENCING_TOKEN"
)

const lockUsageLine = "usage: baton lock [--redis URL]... [--redis-password-file FILE] [--config FILE] [--ttl D] [--wait D] [--grace D] [--fair] [--prefix P] KEY -- CMD [ARGS]"

const lockHelp = lockUsageLine + `

Runs CMD (no shell) while holding the distributed lock KEY, like flock(1)
across machines. The lease is extended every ttl/3 while CMD runs. CMD gets
BATON_LOCK_KEY and BATON_FENCING_TOKEN (strictly increasing across holders)
in its environment (of baton's own environment only PATH, HOME, LANG, LC_*,
TZ and USER, and what --inherit-env names: baton's may hold a Redis
password) and runs in its own process group (so it cannot read from
a terminal); SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
baton are forwarded to that group. CMD runs under baton's supervisor, which
knows the lease's deadline: if the lock is lost, or baton itself stops
extending it (frozen, starved), the group gets SIGTERM up to --grace before
the deadline and SIGKILL just before it, so CMD never outlives the lock;
baton then exits 76. Linux only.

Each --redis URL (redis:// or rediss://, with user, password, db) is one
independent master; several masters form a Redlock quorum. Without --redis:
locking.masters, then redis.url from --config, then $BATON_REDIS_URL, then
` + defaultRedisURL + `. A URL without a password gets the first line of
--redis-password-file, else $REDISCLI_AUTH: a password there stays out of
the command line that ps shows. --config reads the redis, locking and
namespace sections of a baton config as every command does (${VAR}
expanded, validated); the jobs are not read.

Exit status: CMD's status (128+N if killed by signal N); 2 usage error;
69 Redis unavailable; 75 lock busy; 76 lock lost while CMD ran (CMD stopped);
126 CMD not executable; 127 CMD not found.

flags:
`

// forwardedSignals are relayed to CMD's process group.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// masterURL is one Redis master named on the command line, in the config
// file or in the environment.
type masterURL struct {
	raw    string // as given; may hold a password, never print it
	source string // where it came from, for messages
	opts   *redis.Options
}

// lockConfig is the parsed command line of "baton lock".
type lockConfig struct {
	key     string
	argv    []string
	masters []masterURL
	ttl     time.Duration
	wait    time.Duration
	grace   time.Duration
	fair    bool
	prefix  string
	// the lock masters' restart handling, as baton run uses them
	quarantine time.Duration
	fresh      bool
	inherit    []string // more of baton's environment for CMD (childenv patterns)
	secrets    []string // the config's ${VAR} values, scrubbed from messages
}

// urlList is a repeatable string flag.
type urlList []string

// String implements flag.Value. It is only used for the (empty) default.
func (u *urlList) String() string { return strings.Join(*u, ",") }

// Set implements flag.Value: each --redis adds one master.
func (u *urlList) Set(s string) error { *u = append(*u, s); return nil }

// usageError is a command-line or configuration mistake: exit 2.
type usageError struct{ msg string }

// Error returns the message, without the usage line.
func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// lockRun is one invocation of "baton lock".
type lockRun struct {
	cfg     lockConfig
	stdout  io.Writer
	stderr  io.Writer // serialised; our own messages go here
	child   io.Writer // CMD's stderr: the caller's file, or stderr when not a file
	secrets []string  // passwords to scrub from every message
}

// runLock implements "baton lock"; see lockHelp.
func runLock(args []string, stdout, stderr io.Writer) int {
	sw := &syncWriter{w: stderr}
	r := &lockRun{stdout: stdout, stderr: sw, child: sw}
	if _, ok := stderr.(*os.File); ok {
		r.child = stderr // pass the real file through: CMD may check isatty
	}
	cfg, help, err := parseLock(args, stdout)
	if help {
		return 0
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

// parseLock parses the arguments of "baton lock". help is true when -h was
// given (the help text has been written to stdout).
func parseLock(args []string, stdout io.Writer) (cfg lockConfig, help bool, err error) {
	fs := flag.NewFlagSet("baton lock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var urls urlList
	fs.Var(&urls, "redis", "Redis master `URL`; repeat for a quorum of independent masters")
	configFile := fs.String("config", "", "baton YAML config `FILE` (reads its redis, locking and namespace sections; ${VAR} expanded)")
	passwordFile := fs.String("redis-password-file", "", "read the Redis password from the first line of `FILE` (for URLs without one; else $"+envRedisAuth+")")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "lease ttl; extended every ttl/3 while CMD runs")
	fs.DurationVar(&cfg.wait, "wait", 0, "how long to wait for the lock; 0 tries once")
	fs.DurationVar(&cfg.grace, "grace", defaultGrace, "after losing the lock, time between SIGTERM and SIGKILL of CMD")
	fs.BoolVar(&cfg.fair, "fair", false, "wait in FIFO order (single master only)")
	fs.StringVar(&cfg.prefix, "prefix", defaultPrefix, "prefix of the lock's Redis keys")
	fs.DurationVar(&cfg.quarantine, "restart-quarantine", time.Minute, "how long a lock master that restarted grants nothing, from its start (at least --ttl)")
	var inherit urlList
	fs.Var(&inherit, "inherit-env", "pass baton's environment variable `NAME` on to CMD (a name, a prefix ending in *, or * for all; repeatable); CMD always gets "+strings.Join(childenv.Default, ", "))
	fs.BoolVar(&cfg.fresh, "fresh-deployment", false, "masters with no trace of an earlier life (no marker key) vote at once instead of waiting out the quarantine")

	parse := func(a []string) error {
		err := fs.Parse(a)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, lockHelp)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		if err != nil {
			return usagef("%v", err)
		}
		return nil
	}
	if err := parse(args); err != nil {
		return cfg, errors.Is(err, flag.ErrHelp), err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return cfg, false, usagef("missing KEY")
	}
	cfg.key, rest = rest[0], rest[1:]
	if cfg.key == "" {
		return cfg, false, usagef("KEY is empty")
	}
	if jobs.InternalLockName(cfg.key) {
		return cfg, false, usagef("KEY %q is a name baton uses for its own leases (exec:JOB, fence:JOB, singleton:JOB, %s); pick another", cfg.key, jobs.ClusterLeaderElection)
	}
	// flags may also come between KEY and "--"
	sep := -1
	for i, a := range rest {
		if a == "--" {
			sep = i
			break
		}
	}
	if sep < 0 {
		if len(rest) == 0 {
			return cfg, false, usagef("missing -- CMD after KEY %q", cfg.key)
		}
		return cfg, false, usagef("missing -- between KEY %q and CMD", cfg.key)
	}
	if err := parse(rest[:sep]); err != nil {
		return cfg, errors.Is(err, flag.ErrHelp), err
	}
	if fs.NArg() > 0 {
		return cfg, false, usagef("unexpected argument %q between KEY and --", fs.Arg(0))
	}
	cfg.argv = rest[sep+1:]
	if len(cfg.argv) == 0 || cfg.argv[0] == "" {
		return cfg, false, usagef("missing CMD after --")
	}

	switch {
	case cfg.ttl <= 0:
		return cfg, false, usagef("--ttl %v must be positive", cfg.ttl)
	case cfg.wait < 0:
		return cfg, false, usagef("--wait %v must not be negative", cfg.wait)
	case cfg.grace < 0:
		return cfg, false, usagef("--grace %v must not be negative", cfg.grace)
	}
	for _, p := range inherit {
		if err := childenv.Check(p); err != nil {
			return cfg, false, usagef("--inherit-env: %v", err)
		}
	}
	cfg.inherit = inherit

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	prefixSet := set["prefix"]

	// masters: --redis, else the config file, else $BATON_REDIS_URL, else the default
	var raws []string
	source := "--redis"
	if len(urls) > 0 {
		raws = urls
	}
	if *configFile != "" {
		fc, err := loadConfig(*configFile)
		if err != nil {
			return cfg, false, err
		}
		if raws == nil {
			switch {
			case len(fc.Locking.Masters) > 0:
				raws, source = fc.Locking.Masters, "locking.masters in "+*configFile
			case fc.Redis.URL != "":
				raws, source = []string{fc.Redis.URL}, "redis.url in "+*configFile
			}
		}
		if !prefixSet && fc.Namespace != "" {
			cfg.prefix = fc.Namespace + ":lock:"
		}
		if !set["restart-quarantine"] && fc.Locking.RestartQuarantine > 0 {
			cfg.quarantine = fc.Locking.RestartQuarantine
		}
		cfg.fresh = cfg.fresh || fc.Locking.FreshDeployment
		cfg.secrets = fc.SecretValues()
	}
	password, passwordSource, err := redisPassword(*passwordFile)
	if err != nil {
		return cfg, false, err
	}
	if raws == nil {
		if env := os.Getenv(envRedisURL); env != "" {
			raws, source = []string{env}, "$"+envRedisURL
		} else {
			raws, source = []string{defaultRedisURL}, "default"
		}
	}
	seen := map[string]string{}
	for _, raw := range raws {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error quotes the whole URL, password included
			}
			return cfg, false, usagef("bad Redis URL %s (%s): %v", redactURL(raw), source, err)
		}
		if prev, dup := seen[opts.Addr]; dup {
			return cfg, false, usagef("Redis master %s (%s) is listed twice (also as %s); quorum masters must be independent servers", opts.Addr, source, redactURL(prev))
		}
		seen[opts.Addr] = raw
		src := source
		if opts.Password == "" && password != "" {
			opts.Password = password
			src += " with the password of " + passwordSource
		}
		// let the lock library's per-call deadlines bound every network call
		opts.ContextTimeoutEnabled = true
		cfg.masters = append(cfg.masters, masterURL{raw: raw, source: src, opts: opts})
	}
	return cfg, false, nil
}

// loadConfig loads the redis, locking and namespace sections of a baton
// config file as every other command loads them (${VAR} expanded,
// validated); the jobs are not read, so a crontab need not have their
// variables.
func loadConfig(path string) (*jobs.Config, error) {
	cfg, err := jobs.LoadConnectionFile(path)
	if err == nil {
		return cfg, nil
	}
	var ce *jobs.ConfigError
	if errors.As(err, &ce) {
		return nil, usagef("config: %s", strings.ReplaceAll(ce.Error(), "\n", "; "))
	}
	return nil, usagef("config: %s", strings.TrimPrefix(err.Error(), "jobs: "))
}

// redisPassword returns the password for masters whose URL carries none:
// the first line of --redis-password-file, else $REDISCLI_AUTH (as
// redis-cli reads it), else "". source names where it came from.
func redisPassword(file string) (password, source string, err error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", usagef("--redis-password-file: %v", err)
		}
		p, _, _ := strings.Cut(string(data), "\n")
		p = strings.TrimSuffix(p, "\r")
		if p == "" {
			return "", "", usagef("--redis-password-file %s: the first line is empty", file)
		}
		return p, "--redis-password-file", nil
	}
	if p := os.Getenv(envRedisAuth); p != "" {
		return p, "$" + envRedisAuth, nil
	}
	return "", "", nil
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
	logger := log.New(&scrubWriter{w: r.stderr, scrub: r.scrub}, "baton lock: ", 0)
	var fresh locking.Option
	if cfg.fresh {
		fresh = locking.WithFreshDeployment()
	}
	client, err := locking.New(rdbs, locking.WithPrefix(cfg.prefix), locking.WithLogger(logger),
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
		if cfg.wait == 0 {
			res.lease, res.err = client.TryLock(ctx, cfg.key, cfg.ttl, append(opts, locking.WithAutoExtend(true))...)
		} else {
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
		return nil, ExitUnavailable, false
	}
	var down []locking.MasterError
	for _, f := range oe.Failures {
		if !isBusy(f) {
			down = append(down, f)
		}
	}
	if errors.Is(err, locking.ErrNotObtained) && !oe.Expired && len(cfg.masters)-len(down) >= oe.Quorum {
		r.printf("%q is held by another process (waited %v)", cfg.key, cfg.wait)
		return nil, ExitBusy, false
	}
	if len(down) == 0 { // validity used up on the way: masters too slow
		r.printf("cannot take lock %q: %v", cfg.key, err)
		return nil, ExitUnavailable, false
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
	return nil, ExitUnavailable, false
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
		return redactURL(r.cfg.masters[f.Index].raw)
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
	deadline := lease.Deadline()
	p, err := supervisor.Start(context.Background(), supervisor.Spec{
		Args: cfg.argv,
		Env: append(childenv.Filter(os.Environ(), cfg.inherit),
			envLockKey+"="+cfg.key,
			envFencingToken+"="+strconv.FormatInt(lease.Fence(), 10)),
		Stdin:    os.Stdin,
		Stdout:   r.stdout,
		Stderr:   r.child,
		Deadline: deadline,
		Grace:    cfg.grace,
		// a short lease needs a short margin, or the supervisor's SIGTERM
		// (no earlier than half the time left) would beat the regular
		// extension at a third of the ttl
		Margin: min(supervisor.DefaultMargin, cfg.ttl/20),
		Quiet:  true,
	})
	if err != nil {
		code := ExitCannotExec
		switch {
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
			code = ExitNotFound
		case errors.Is(err, supervisor.ErrDeadline):
			r.printf("lock %q lost before %q could start: %v", cfg.key, cfg.argv[0], err)
			r.release(lease)
			return ExitLockLost
		case errors.Is(err, errors.ErrUnsupported):
			code = ExitUsage
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
		return ExitLockLost
	}
	if res.err != nil {
		r.printf("supervising %q: %v", cfg.argv[0], res.err)
		r.release(lease)
		return ExitCannotExec
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

// usage reports a usage or configuration error and returns ExitUsage.
func (r *lockRun) usage(err error) int {
	r.printf("%v", err)
	fmt.Fprintln(r.stderr, lockUsageLine)
	return ExitUsage
}

// printf writes one line "baton lock: ..." to stderr, passwords scrubbed.
func (r *lockRun) printf(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	fmt.Fprintln(r.stderr, r.scrub("baton lock: "+msg))
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

// redactURL shows a Redis URL without its password. locking.RedactURL returns
// URLs it cannot parse unchanged; those get their user info masked here.
func redactURL(raw string) string {
	if red := locking.RedactURL(raw); red != raw {
		return red
	}
	if _, err := url.Parse(raw); err == nil {
		return raw // parsed and has no password
	}
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		start := 0
		if i := strings.Index(raw, "://"); i >= 0 && i < at {
			start = i + 3
		}
		return raw[:start] + "xxxxx" + raw[at:]
	}
	return raw
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

// scrubWriter scrubs passwords from what the lock library logs.
type scrubWriter struct {
	w     io.Writer
	scrub func(string) string
}

// Write writes p with passwords scrubbed.
func (s *scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
