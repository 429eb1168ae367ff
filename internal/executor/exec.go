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

type waitResult struct {
	code int
	err  error
}

// runExec runs the job's command under a supervisor, forwarding v's
// deadline to it, and stops it when ctx or v ends.
func (e *Executor) runExec(ctx context.Context, job *config.Job, run jobs.Run, v Validity) (jobs.Result, error) {
	res := jobs.Result{ExitCode: -1}
	argv := job.Exec.Command
	if len(argv) == 0 {
		return res, fmt.Errorf("jobs: job %q: exec: empty command", job.Name)
	}
	env := childenv.Filter(os.Environ(), job.Exec.InheritEnv)
	for _, k := range slices.Sorted(maps.Keys(job.Exec.Env)) {
		env = append(env, k+"="+job.Exec.Env[k])
	}
	env = append(env, run.Env()...) // last wins: the run's identity cannot be overridden
	out := newTailBuffer(e.outputLimit)
	grace := stopGrace(job)
	var (
		deadline time.Time
		vDone    <-chan struct{}
	)
	if v != nil {
		deadline, vDone = v.Deadline(), v.Done()
	}
	log := e.log.With(slog.String("job", job.Name), slog.String("run_id", run.RunID))

	spec := supervisor.Spec{
		Path:     e.supervisorPath,
		Args:     argv,
		Env:      env,
		Dir:      job.Exec.Dir,
		Stdout:   out,
		Stderr:   out,
		Deadline: deadline,
		Grace:    grace,
		Cgroups:  e.cgroups,
		Name:     job.Name,
	}
	var (
		p   *supervisor.Process
		err error
	)
	if v != nil {
		p, deadline, err = supervisor.StartUnder(ctx, v, spec)
	} else {
		p, err = supervisor.Start(ctx, spec)
	}
	if err != nil {
		res.Output = out.Bytes()
		if errors.Is(err, supervisor.ErrDeadline) {
			return res, fmt.Errorf("%w: job %q: %q not started: %w", ErrLeaseDeadline, job.Name, argv[0], err)
		}
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = errors.Join(err, cause)
		}
		return res, fmt.Errorf("jobs: job %q: exec %q: %w", job.Name, argv[0], err)
	}
	log.Debug("command started", slog.Int("pid", p.ChildPid()), slog.Int("supervisor_pid", p.Pid()), slog.String("cgroup", p.Cgroup()))

	waited := make(chan waitResult, 1)
	go func() {
		code, err := p.Wait()
		waited <- waitResult{code, err}
	}()

	var (
		stopped  error            // why Stop was sent, nil if not
		escalate <-chan time.Time // kill the supervisor if it ignores Stop
		ctxDone  = ctx.Done()
		// the first poll comes at once: a supervisor slow to start (a busy
		// host) spent part of the deadline it was handed, and arms its
		// SIGTERM at half of what is left
		poll  = time.NewTimer(0)
		polls = poll.C
	)
	defer poll.Stop()
	if v == nil {
		polls = nil // no deadline to forward
	}
	stop := func(why error) {
		ctxDone, vDone = nil, nil
		if stopped != nil {
			return
		}
		stopped = why
		if err := p.Stop(grace); err != nil && !errors.Is(err, supervisor.ErrDone) {
			log.Warn("cannot stop the command", slog.Any("error", err))
		}
		escalate = time.After(grace + stopEscalation)
	}
	var w waitResult
wait:
	for {
		select {
		case w = <-waited:
			break wait
		case <-ctxDone:
			stop(context.Cause(ctx))
		case <-vDone:
			stop(errors.New("jobs: the run's lease ended"))
		case <-escalate:
			escalate = nil
			log.Warn("supervisor ignored the stop: killing it", slog.Int("supervisor_pid", p.Pid()))
			_ = p.Kill()
		case <-polls:
			if d := v.Deadline(); !d.Equal(deadline) {
				deadline = d
				if err := p.Extend(d); err != nil && !errors.Is(err, supervisor.ErrDone) {
					log.Warn("cannot forward the validity deadline to the supervisor", slog.Any("error", err))
				}
			}
			poll.Reset(deadlinePoll(deadline))
		}
	}

	res.Output = out.Bytes()
	res.ExitCode = w.code
	switch {
	case errors.Is(w.err, supervisor.ErrDeadline):
		res.KilledByDeadline, res.ExitCode = true, -1
		return res, fmt.Errorf("%w: job %q: %q killed by its supervisor", ErrLeaseDeadline, job.Name, argv[0])
	case w.err != nil:
		err := fmt.Errorf("jobs: job %q: exec %q: %w", job.Name, argv[0], w.err)
		if stopped != nil {
			err = errors.Join(err, stopped)
		}
		return res, err
	case stopped != nil:
		return res, fmt.Errorf("jobs: job %q: %q stopped (exit code %d): %w", job.Name, argv[0], w.code, stopped)
	case w.code != 0:
		return res, fmt.Errorf("%w: job %q: %q exited with code %d", ErrNonZeroExit, job.Name, argv[0], w.code)
	}
	return res, nil
}
