package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/runcgroup"
	"github.com/batonhq/baton/internal/supervisor"
	"github.com/batonhq/baton/jobs"
)

// Errors of Execute, each wrapped with the job's name and details.
var (
	// ErrNonZeroExit: an exec job's command exited with a code other than
	// 0 (jobs.Result.ExitCode has it; 128+n means it died of signal n).
	ErrNonZeroExit = errors.New("executor: non-zero exit")
	// ErrUnexpectedStatus: an http job's response status is not one of
	// ExpectStatus (any 2xx if that is empty). jobs.Result.Status has it.
	ErrUnexpectedStatus = errors.New("executor: unexpected http status")
	// ErrUnknownHandler: a handler job names no handler of the registry.
	ErrUnknownHandler = errors.New("executor: unknown handler")
	// ErrLeaseDeadline: the run's validity deadline passed while an exec
	// job's command ran, and its supervisor killed it
	// (jobs.Result.KilledByDeadline), or it passed before the command started.
	ErrLeaseDeadline = errors.New("executor: lease validity deadline passed")
)

// Executor runs executions of jobs: exec commands under a supervisor
// process, http requests, and Go handlers from a Registry. It is safe for
// concurrent use.
type Executor struct {
	handlers       *jobs.Registry
	supervisorPath string
	cgroupDir      string          // WithCgroups
	cgroups        *runcgroup.Root // where runs get cgroups; nil for none
	outputLimit    int
	client         *http.Client
	// runtimeClient is client following no redirect: a runtime schedule's
	// URL lies under schedules.http_prefixes, where it is redirected to
	// need not
	runtimeClient *http.Client
	log           *slog.Logger
}

// New returns an executor with the given options.
func New(opts ...Option) *Executor {
	e := &Executor{outputLimit: DefaultOutputLimit, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(e)
	}
	if e.client == nil {
		e.client = &http.Client{}
	}
	rc := *e.client
	rc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.runtimeClient = &rc
	e.cgroups = openCgroups(e.cgroupDir, e.log)
	return e
}

// openCgroups opens the Root exec runs get their cgroups in, and removes
// what runs of a baton that is gone left there. Where there is none it
// logs one line and returns nil: runs are then found by their process
// tree and their environment mark alone.
func openCgroups(dir string, log *slog.Logger) *runcgroup.Root {
	root, err := runcgroup.Open(dir)
	if err != nil {
		level := slog.LevelInfo
		if dir != "" && dir != runcgroup.Off {
			level = slog.LevelWarn // asked for, and not had
		}
		log.Log(context.Background(), level, "exec runs get no cgroup of their own: a process a run starts that leaves "+
			"its process group and clears or overwrites its environment (the "+supervisor.TreeEnv+" mark) outlives "+
			"the run if the run's supervisor dies before it (killed by the job, or with baton)",
			slog.String("reason", err.Error()))
		return nil
	}
	left, err := root.RemoveLeftovers()
	empty := 0
	for _, l := range left {
		if l.Killed == 0 {
			// nothing outlived that run: housekeeping, not news
			empty++
			continue
		}
		log.Warn("removed the cgroup of a run of a baton process that is gone, and killed what ran in it",
			slog.String("cgroup", l.Dir), slog.Int("killed", l.Killed))
	}
	if empty > 0 {
		log.Info("removed the empty cgroups of runs of baton processes that are gone", slog.Int("cgroups", empty))
	}
	if err != nil {
		log.Warn("cannot remove the cgroup of a run of a baton process that is gone", slog.Any("error", err))
	}
	log.Info("exec runs get a cgroup of their own", slog.String("in", root.Dir()))
	return root
}

// Execute runs one execution of job and returns what it produced. ctx ends
// the execution when it ends (the caller ends it when the lease is lost, the
// run is replaced or the worker shuts down); Job.Timeout, if > 0, bounds it
// too. v is the lease the run holds, nil for none: an exec job's command is
// killed by its supervisor at v's validity deadline at the latest, even if
// this process is frozen, and v.Done() stops it like ctx does.
//
// How the kinds run:
//   - exec: Command without a shell, environment the allowlisted part of
//     os.Environ() (internal/childenv: PATH, HOME, LANG, LC_*, TZ, USER and
//     Exec.InheritEnv) + Exec.Env + run.Env(), in Exec.Dir, under a supervisor process (see
//     internal/supervisor), in a cgroup of its own (WithCgroups). When ctx
//     ends or v ends, the command's process group gets SIGTERM and, after
//     a grace of min(5s, Job.Timeout/10), SIGKILL; when the command ends,
//     every process left in its group, below its supervisor or in its
//     cgroup is killed. Errors: ErrNonZeroExit, ErrLeaseDeadline, exec.ErrNotFound
//     (no such command), ctx's cause (stopped).
//   - http: Method to URL with Headers + run.Headers() and Body. Errors:
//     ErrUnexpectedStatus, the client's error (which wraps ctx's).
//   - handler: the registry's handler under ctx, with run.Payload set to
//     Handler.Payload. Errors: ErrUnknownHandler, the handler's error (a
//     panic becomes an error).
//
// Error messages have the config's ${VAR} values masked; http errors name
// the URL as scheme://host/path.
func (e *Executor) Execute(ctx context.Context, job *config.Job, run jobs.Run, v Validity) (jobs.Result, error) {
	start := time.Now()
	if job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, job.Timeout,
			fmt.Errorf("executor: job %q: timeout of %v: %w", job.Name, job.Timeout, context.DeadlineExceeded))
		defer cancel()
	}
	var (
		res jobs.Result
		err error
	)
	switch {
	case job.Exec != nil:
		res, err = e.runExec(ctx, job, run, v)
	case job.HTTP != nil:
		res, err = e.runHTTP(ctx, job, run)
	case job.Handler != nil:
		res, err = e.runHandler(ctx, job, run)
	default:
		err = fmt.Errorf("executor: job %q: nothing to run (no exec, http or handler)", job.Name)
	}
	res.Duration = time.Since(start)
	if err != nil && len(job.SecretValues()) > 0 {
		err = &maskedError{err: err, msg: job.MaskSecrets(err.Error())}
	}
	return res, err
}

// maskedError is an execution error whose message has the config's secrets
// masked (a command path or argument, a URL, echoed in the error of exec or
// net/http). errors.Is and As still see the original.
type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// runHandler calls the job's registered handler.
func (e *Executor) runHandler(ctx context.Context, job *config.Job, run jobs.Run) (res jobs.Result, err error) {
	name := job.Handler.Name
	var h jobs.Handler
	ok := false
	if e.handlers != nil {
		h, ok = e.handlers.Lookup(name)
	}
	if !ok {
		return res, fmt.Errorf("%w: job %q: handler %q is not registered", ErrUnknownHandler, job.Name, name)
	}
	run.Payload = job.Handler.Payload
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("handler panicked", slog.String("job", job.Name), slog.String("handler", name),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("executor: job %q: handler %q panicked: %v", job.Name, name, p)
		}
	}()
	if err := h.Handle(ctx, run); err != nil {
		return res, fmt.Errorf("executor: job %q: handler %q: %w", job.Name, name, err)
	}
	return res, nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

var _ io.Writer = (*tailBuffer)(nil)

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

// Write keeps the end of p; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return n, nil
	}
	if len(t.buf)+len(p) > 2*t.limit { // compact: amortized O(1) per byte
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-(t.limit-len(p)):]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns a copy of the kept bytes: the last limit bytes written.
func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.limit {
		b = b[len(b)-t.limit:]
	}
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Validity is what a run's executor needs from the lease it runs under: the
// validity deadline, which moves on every confirmed extension, and a channel
// closed when the lease ends. *locking.Lease satisfies it. Nil means the run
// holds no lease (concurrency: allow).
type Validity interface {
	Deadline() time.Time
	Done() <-chan struct{}
}

// Runner runs one execution of a job; *Executor is the one baton uses, and
// a program may wrap it (to time runs, say). ctx ends when the run must stop
// (lease lost, timeout, replaced, shutdown); v is the run's execution lease,
// nil for concurrency: allow.
type Runner interface {
	Execute(ctx context.Context, job *config.Job, run jobs.Run, v Validity) (jobs.Result, error)
}
