package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/childenv"
	"github.com/batonhq/baton/internal/supervisor"
	"github.com/batonhq/baton/jobs"
)

// Stop grace of exec jobs: SIGTERM, then SIGKILL after min(maxStopGrace,
// Job.Timeout/10), at least minStopGrace.
const (
	maxStopGrace = 5 * time.Second
	minStopGrace = 10 * time.Millisecond
)

// stopEscalation is how long past the stop grace Execute waits for a
// supervisor before it kills the supervisor itself.
const stopEscalation = 2 * time.Second

// stopGrace is the time between SIGTERM and SIGKILL for job's command.
func stopGrace(job *config.Job) time.Duration {
	g := maxStopGrace
	if job.Timeout > 0 {
		g = min(g, job.Timeout/10)
	}
	return max(g, minStopGrace)
}

// deadlinePoll is how often the validity deadline is re-read and forwarded
// to the supervisor: a tenth of the time left, within [10ms, 1s].
func deadlinePoll(deadline time.Time) time.Duration {
	if deadline.IsZero() {
		return time.Second
	}
	return min(max(time.Until(deadline)/10, 10*time.Millisecond), time.Second)
}

// runExec runs the job's command under a supervisor, forwarding v's
// deadline to it, and stops it when ctx or v ends. Its walk: the
// command's environment (execEnv) and the supervisor's spec (execSpec),
// the supervisor started (execRun.start), the run watched until the
// command exits (execRun.wait), and its end turned into the result
// (execRun.result).
func (e *Executor) runExec(ctx context.Context, job *config.Job, run jobs.Run, v Validity) (jobs.Result, error) {
	res := jobs.Result{ExitCode: -1}
	if len(job.Exec.Command) == 0 {
		return res, fmt.Errorf("executor: job %q: exec: empty command", job.Name)
	}
	env := execEnv(job, run)
	out := newTailBuffer(e.outputLimit)
	r := e.newExecRun(job, run, v)
	if err := r.start(ctx, e.execSpec(job, env, out, r.deadline, r.grace)); err != nil {
		res.Output = out.Bytes()
		return res, err
	}
	w := r.wait(ctx)
	res.Output = out.Bytes()
	return r.result(res, w)
}

// execEnv is the environment of job's command: the allowlisted part of
// os.Environ() (internal/childenv), then Exec.Env in the order of its
// names, then the run's identity, last so that it wins: a job cannot
// override it.
func execEnv(job *config.Job, run jobs.Run) []string {
	env := childenv.Filter(os.Environ(), job.Exec.InheritEnv)
	for _, k := range slices.Sorted(maps.Keys(job.Exec.Env)) {
		env = append(env, k+"="+job.Exec.Env[k])
	}
	return append(env, run.Env()...)
}

// execSpec is the spec of the supervisor of job's command: env, the
// command's output into out, the validity deadline (zero: none) and the
// stop grace, in a cgroup of its own when the executor has them.
func (e *Executor) execSpec(job *config.Job, env []string, out *tailBuffer, deadline time.Time, grace time.Duration) supervisor.Spec {
	return supervisor.Spec{
		Path:     e.supervisorPath,
		Args:     job.Exec.Command,
		Env:      env,
		Dir:      job.Exec.Dir,
		Stdout:   out,
		Stderr:   out,
		Deadline: deadline,
		Grace:    grace,
		Cgroups:  e.cgroups,
		Name:     job.Name,
	}
}

// execRun is one run of an exec job's command, as runExec watches it: its
// supervisor, the lease it runs under, and whether and why it was stopped.
type execRun struct {
	job, prog string          // the job's name and its command's argv[0]
	v         Validity        // the run's lease; nil for none
	vDone     <-chan struct{} // v.Done(); nil for no lease
	deadline  time.Time       // the validity deadline the supervisor has; zero: none
	grace     time.Duration   // SIGTERM to SIGKILL on a stop (stopGrace)
	log       *slog.Logger
	p         *supervisor.Process
	stopped   error            // why Stop was sent, nil if not
	escalate  <-chan time.Time // kill the supervisor if it ignores Stop
}

type waitResult struct {
	code int
	err  error
}

// newExecRun returns the run of job's command under v (nil: no lease),
// not started: its deadline is v's as it stands now.
func (e *Executor) newExecRun(job *config.Job, run jobs.Run, v Validity) *execRun {
	r := &execRun{job: job.Name, prog: job.Exec.Command[0], v: v, grace: stopGrace(job),
		log: e.log.With(slog.String("job", job.Name), slog.String("run_id", run.RunID))}
	if v != nil {
		r.deadline, r.vDone = v.Deadline(), v.Done()
	}
	return r
}

// start starts the supervisor of spec: under the lease, whose deadline
// may have moved meanwhile (supervisor.StartUnder), or without one. Its
// error is runExec's: ErrLeaseDeadline when the deadline passed before
// the command could start; else the start's error (exec.ErrNotFound, ...)
// joined with ctx's cause unless it holds it already.
func (r *execRun) start(ctx context.Context, spec supervisor.Spec) error {
	var err error
	if r.v != nil {
		r.p, r.deadline, err = supervisor.StartUnder(ctx, r.v, spec)
	} else {
		r.p, err = supervisor.Start(ctx, spec)
	}
	if err != nil {
		if errors.Is(err, supervisor.ErrDeadline) {
			return fmt.Errorf("%w: job %q: %q not started: %w", ErrLeaseDeadline, r.job, r.prog, err)
		}
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = errors.Join(err, cause)
		}
		return fmt.Errorf("executor: job %q: exec %q: %w", r.job, r.prog, err)
	}
	r.log.Debug("command started", slog.Int("pid", r.p.ChildPid()), slog.Int("supervisor_pid", r.p.Pid()), slog.String("cgroup", r.p.Cgroup()))
	return nil
}

// wait watches the started run until its supervisor has exited and
// returns how it ended. When ctx or the lease ends first it stops the
// command (stop), and kills the supervisor should that ignore the stop
// for the grace plus stopEscalation. Under a lease it forwards every new
// validity deadline (forwardDeadline), looking every deadlinePoll, the
// first time at once: a supervisor slow to start (a busy host) spent part
// of the deadline it was handed, and arms its SIGTERM at half of what is
// left.
func (r *execRun) wait(ctx context.Context) waitResult {
	waited := make(chan waitResult, 1)
	go func() {
		code, err := r.p.Wait()
		waited <- waitResult{code, err}
	}()
	ctxDone, vDone := ctx.Done(), r.vDone
	poll := time.NewTimer(0)
	defer poll.Stop()
	polls := poll.C
	if r.v == nil {
		polls = nil // no deadline to forward
	}
	for {
		select {
		case w := <-waited:
			return w
		case <-ctxDone:
			ctxDone, vDone = nil, nil
			r.stop(context.Cause(ctx))
		case <-vDone:
			ctxDone, vDone = nil, nil
			r.stop(errors.New("executor: the run's lease ended"))
		case <-r.escalate:
			r.escalate = nil
			r.log.Warn("supervisor ignored the stop: killing it", slog.Int("supervisor_pid", r.p.Pid()))
			_ = r.p.Kill()
		case <-polls:
			r.forwardDeadline()
			poll.Reset(deadlinePoll(r.deadline))
		}
	}
}

// stop has the supervisor stop the command (SIGTERM to its process group,
// SIGKILL after the grace) because of why, once, and arms the escalation:
// the supervisor is killed if it has not exited grace + stopEscalation
// later.
func (r *execRun) stop(why error) {
	if r.stopped != nil {
		return
	}
	r.stopped = why
	if err := r.p.Stop(r.grace); err != nil && !errors.Is(err, supervisor.ErrDone) {
		r.log.Warn("cannot stop the command", slog.Any("error", err))
	}
	r.escalate = time.After(r.grace + stopEscalation)
}

// forwardDeadline hands the supervisor the lease's validity deadline if it
// moved since the supervisor was last handed one.
func (r *execRun) forwardDeadline() {
	if d := r.v.Deadline(); !d.Equal(r.deadline) {
		r.deadline = d
		if err := r.p.Extend(d); err != nil && !errors.Is(err, supervisor.ErrDone) {
			r.log.Warn("cannot forward the validity deadline to the supervisor", slog.Any("error", err))
		}
	}
}

// result completes res with the run's end w and returns runExec's error:
// ErrLeaseDeadline when the supervisor killed the command at the deadline
// (res.KilledByDeadline, ExitCode -1); the supervisor's error, joined with
// why the run was stopped if it was; why it was stopped; ErrNonZeroExit;
// or nil.
func (r *execRun) result(res jobs.Result, w waitResult) (jobs.Result, error) {
	res.ExitCode = w.code
	switch {
	case errors.Is(w.err, supervisor.ErrDeadline):
		res.KilledByDeadline, res.ExitCode = true, -1
		return res, fmt.Errorf("%w: job %q: %q killed by its supervisor", ErrLeaseDeadline, r.job, r.prog)
	case w.err != nil:
		err := fmt.Errorf("executor: job %q: exec %q: %w", r.job, r.prog, w.err)
		if r.stopped != nil {
			err = errors.Join(err, r.stopped)
		}
		return res, err
	case r.stopped != nil:
		return res, fmt.Errorf("executor: job %q: %q stopped (exit code %d): %w", r.job, r.prog, w.code, r.stopped)
	case w.code != 0:
		return res, fmt.Errorf("%w: job %q: %q exited with code %d", ErrNonZeroExit, r.job, r.prog, w.code)
	}
	return res, nil
}
