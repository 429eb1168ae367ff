package singleton

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/runid"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

// errSingletonShutdown is the cause that ends singleton runs on Shutdown.
var errSingletonShutdown = errors.New("singleton: shutting down")

// Jobs runs the config's singleton jobs: every replica campaigns for
// each; the leader runs it.
type Jobs struct {
	cfg     *config.Config
	locks   *locking.Client
	exec    executor.Runner
	replica string
	log     *slog.Logger
	clock   clock.Clock // restart backoffs
	jobs    []*config.Job

	started, exited, lost atomic.Uint64

	ctx    context.Context // ends at Shutdown
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	elections map[string]*locking.Election // by job name
	leading   map[string]bool              // jobs this replica leads now
	running   bool
	closing   bool
	wg        sync.WaitGroup
}

// Stats counts a replica's singleton runs since it was made.
type Stats struct {
	// Started counts runs started (first runs and restarts).
	Started uint64
	// Exited counts runs that returned on their own while still leading
	// (with an error or not) and were restarted after the backoff.
	Exited uint64
	// Lost counts terms that ended because leadership was lost.
	Lost uint64
}

// Holder is one singleton job's current leader, for `baton status`.
type Holder struct {
	Job     string
	Leader  locking.Leader
	Leading bool // some replica leads; Leader is meaningful only then
}

// New returns the runner of cfg's singleton jobs. locks holds the
// elections (it stays owned by the caller and must outlive Shutdown); exec
// runs the jobs (an *executor.Executor; nil for a Jobs that only reads
// Holders). Nothing happens until Start.
func New(cfg *config.Config, locks *locking.Client, exec executor.Runner, opts ...Option) *Jobs {
	o := options{log: slog.New(slog.DiscardHandler), clock: clock.Real()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.replica == "" {
		o.replica = runid.Replica()
	}
	s := &Jobs{
		cfg:       cfg,
		locks:     locks,
		exec:      exec,
		log:       o.log,
		replica:   o.replica,
		clock:     o.clock,
		elections: map[string]*locking.Election{},
		leading:   map[string]bool{},
	}
	for i := range cfg.Jobs {
		if cfg.Jobs[i].Mode == config.ModeSingleton {
			s.jobs = append(s.jobs, &cfg.Jobs[i])
		}
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	return s
}

// election returns the job's election, made on first use.
func (s *Jobs) election(job *config.Job) (*locking.Election, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.elections[job.Name]; ok {
		return e, nil
	}
	e, err := s.locks.Election(locknames.Singleton(job.Name), job.LockTTL)
	if err != nil {
		return nil, fmt.Errorf("singleton: job %q: election: %w", job.Name, err)
	}
	s.elections[job.Name] = e
	return e, nil
}

// Stats returns the run counters.
func (s *Jobs) Stats() Stats {
	return Stats{Started: s.started.Load(), Exited: s.exited.Load(), Lost: s.lost.Load()}
}

// Start starts one goroutine per singleton job, each campaigning for its job
// and running it while leading. It fails if an election cannot be made or it
// was started (or shut down) before; then nothing runs.
func (s *Jobs) Start() error {
	s.mu.Lock()
	if s.running || s.closing {
		s.mu.Unlock()
		return errors.New("singleton: already started")
	}
	s.mu.Unlock()
	elections := make([]*locking.Election, len(s.jobs))
	for i, job := range s.jobs {
		e, err := s.election(job)
		if err != nil {
			return err
		}
		elections[i] = e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closing {
		return errors.New("singleton: already started")
	}
	s.running = true
	for i, job := range s.jobs {
		s.wg.Go(func() { s.loop(job, elections[i]) })
	}
	return nil
}

// Shutdown stops every running singleton (its context is cancelled: the
// executor stops the process, SIGTERM then SIGKILL for exec jobs), then
// resigns every term, so the next candidate is woken at once, and waits for
// the goroutines. If ctx ends first it returns ctx's error; the goroutines
// still finish on their own (each resign is bounded by its job's lock_ttl).
func (s *Jobs) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("singleton: already shut down")
	}
	s.closing = true
	s.mu.Unlock()
	s.cancel(errSingletonShutdown)
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("singleton: shutdown: %w", ctx.Err())
	}
}

// Leading returns the singleton jobs this replica leads now.
func (s *Jobs) Leading() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name := range s.leading {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Holders returns, per singleton job in config order, who leads it.
func (s *Jobs) Holders(ctx context.Context) ([]Holder, error) {
	out := make([]Holder, 0, len(s.jobs))
	for _, job := range s.jobs {
		e, err := s.election(job)
		if err != nil {
			return nil, err
		}
		l, ok, err := e.Leader(ctx)
		if err != nil {
			return nil, fmt.Errorf("singleton: job %q: leader: %w", job.Name, err)
		}
		out = append(out, Holder{Job: job.Name, Leader: l, Leading: ok})
	}
	return out, nil
}

// loop campaigns for job until Shutdown (or the lock client is closed), and
// leads while it can.
func (s *Jobs) loop(job *config.Job, e *locking.Election) {
	log := s.log.With(slog.String("job", job.Name), slog.String("replica", s.replica))
	retry := newRestartBackoff(job.RestartBackoff)
	for s.ctx.Err() == nil {
		term, err := e.Campaign(s.ctx, s.replica)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if errors.Is(err, locking.ErrClosed) {
				log.Error("singleton stopped: the lock client is closed", slog.Any("error", err))
				return
			}
			d := retry.next(0)
			log.Warn("cannot campaign; retrying", slog.Any("error", err), slog.Duration("in", d))
			if !sleep(s.ctx, s.clock, d) {
				return
			}
			continue
		}
		retry.reset()
		if cool := s.lead(job, term, log.With(slog.Int64("fence", term.Fence()))); cool > 0 {
			// this replica cannot start the job: let the others campaign
			// first (they were woken by the resign)
			if !sleep(s.ctx, s.clock, cool) {
				return
			}
		}
	}
}

// startFailures is how many consecutive runs that cannot start (command not
// found or not executable) make a leader resign, so that a replica where the
// job can start takes over.
const startFailures = 3

// lead runs job under term, restarting it with backoff while leading, until
// the term ends or Shutdown. On Shutdown it resigns the term. After
// startFailures runs in a row that could not start it resigns too, and
// returns how long to wait before campaigning again.
func (s *Jobs) lead(job *config.Job, term *locking.Term, log *slog.Logger) time.Duration {
	s.mu.Lock()
	s.leading[job.Name] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.leading, job.Name)
		s.mu.Unlock()
	}()
	tick := term.Leader().Since
	if tick.IsZero() {
		tick = time.Now()
	}
	log.Info("leading: singleton elected")
	bo := newRestartBackoff(job.RestartBackoff)
	cannotStart := 0
	for attempt := 1; ; attempt++ {
		if s.ctx.Err() != nil {
			s.resign(job, term, log)
			return 0
		}
		alog := log.With(slog.Int("attempt", attempt))
		run := jobs.Run{
			Job:     job.Name,
			Tick:    tick.UTC(),
			RunID:   runid.New(),
			Attempt: attempt,
			Fence:   term.Fence(),
			Replica: s.replica,
		}
		if job.Handler != nil {
			run.Payload = job.Handler.Payload
		}
		runCtx, cancel := context.WithCancelCause(term.Context())
		stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
		s.started.Add(1)
		alog.Info("singleton started", slog.String("run_id", run.RunID))
		start := s.clock.Now()
		res, err := s.exec.Execute(runCtx, job, run, term.Lease())
		took := s.clock.Now().Sub(start)
		stop()
		cancel(nil)
		logRes := alog.With(slog.String("run_id", run.RunID), slog.Duration("took", took))
		switch {
		case job.Exec != nil:
			logRes = logRes.With(slog.Int("exit_code", res.ExitCode))
		case job.HTTP != nil:
			logRes = logRes.With(slog.Int("status", res.Status))
		}

		if s.ctx.Err() != nil {
			logRes.Info("singleton stopped for shutdown", slog.Any("error", err))
			s.resign(job, term, log)
			return 0
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrPermission) {
			if cannotStart++; cannotStart >= startFailures {
				logRes.Error("singleton cannot start on this replica: resigning so another replica can take over", slog.Any("error", err), slog.Int("failures", cannotStart))
				s.resign(job, term, log)
				return max(job.RestartBackoff.Max, time.Second)
			}
		} else {
			cannotStart = 0
		}
		if errors.Is(err, executor.ErrLeaseDeadline) {
			// the supervisor stopped the child at the lease's deadline: no
			// extension was confirmed, so leadership is ending. Restarting
			// now would run a child that the supervisor kills at once.
			t := time.NewTimer(time.Until(term.Deadline()) + 10*time.Millisecond)
			select {
			case <-term.Done():
			case <-t.C:
			case <-s.ctx.Done():
			}
			t.Stop()
		}
		if lostTerm(term) {
			s.lost.Add(1)
			logRes.Warn("singleton stopped: leadership lost", slog.Any("error", err), slog.Any("cause", term.Err()))
			return 0
		}
		s.exited.Add(1)
		d := bo.next(took)
		if err != nil {
			logRes.Warn("singleton exited; restarting", slog.Any("error", err), slog.Duration("backoff", d))
		} else {
			logRes.Info("singleton exited; restarting", slog.Duration("backoff", d))
		}
		t := s.clock.NewTimer(d)
		select {
		case <-t.C():
		case <-s.ctx.Done():
			t.Stop()
		case <-term.Done():
			t.Stop()
			s.lost.Add(1)
			log.Warn("leadership lost while waiting to restart", slog.Any("cause", term.Err()))
			return 0
		}
	}
}

func lostTerm(term *locking.Term) bool {
	select {
	case <-term.Done():
		return true
	default:
		return false
	}
}

// resign gives up term so the next candidate is woken at once.
func (s *Jobs) resign(job *config.Job, term *locking.Term, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), job.LockTTL)
	defer cancel()
	if err := term.Resign(ctx); err != nil && !errors.Is(err, locking.ErrNotHeld) {
		log.Warn("cannot resign (the term expires at its ttl)", slog.Any("error", err))
		return
	}
	log.Info("resigned")
}

// restartBackoff is RestartBackoff's delay: Initial, doubling up to Max; reset after
// a run that lasted longer than Max.
type restartBackoff struct {
	b   config.Backoff
	cur time.Duration
}

func newRestartBackoff(b config.Backoff) *restartBackoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return &restartBackoff{b: b}
}

// next returns the delay before the next start after a run that took took.
func (b *restartBackoff) next(took time.Duration) time.Duration {
	if b.cur == 0 || took > b.b.Max {
		b.cur = b.b.Initial
	} else {
		b.cur = min(2*b.cur, b.b.Max)
	}
	return b.cur
}

func (b *restartBackoff) reset() { b.cur = 0 }

// sleep waits d on c or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
