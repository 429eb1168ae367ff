package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	batonconfig "github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// dispatchRec records, per tick ID, when a Dispatch of it first returned
// nil and how many Dispatch calls returned nil for it (across replicas).
type dispatchRec struct {
	mu    sync.Mutex
	ticks map[string]*dispatched
}

type dispatched struct {
	at    time.Time
	first time.Time
	call  time.Duration // how long the first successful Dispatch call took
	n     int
}

func (r *dispatchRec) add(t scheduler.Tick, began, now time.Time) {
	id := t.ID()
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.ticks[id]
	if d == nil {
		d = &dispatched{at: t.At, first: now, call: now.Sub(began)}
		r.ticks[id] = d
	}
	d.n++
	if now.Before(d.first) {
		d.first = now
	}
}

func (r *dispatchRec) get(id string) dispatched {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.ticks[id]; d != nil {
		return *d
	}
	return dispatched{}
}

// timedDispatcher wraps handoff.Sender: it notes the moment the inner
// Dispatch returned nil (the task is in asynq).
type timedDispatcher struct {
	inner scheduler.Dispatcher
	rec   *dispatchRec
}

func (d timedDispatcher) Dispatch(ctx context.Context, t scheduler.Tick) error {
	began := time.Now()
	err := d.inner.Dispatch(ctx, t)
	if err == nil {
		d.rec.add(t, began, time.Now())
	}
	return err
}

// batonResult is one baton cell.
type batonResult struct {
	jobs, replicas, ticks int
	worker                bool            // the asynq worker ran during the cell
	dispatchLag           []time.Duration // due -> enqueued, one per measured tick dispatched
	dispatchCall          []time.Duration // duration of the (first successful) Dispatch call
	claimAt, followerAt   []time.Duration // per measured instant: due -> last preferred / follower claim pipeline answered
	commitAt              []time.Duration // per measured instant: due -> last commit pipeline answered
	commitPipes           int             // commit pipelines of the measured instants
	startLag              []time.Duration // due -> handler start, one per measured tick handled
	missedDispatch        int             // measured ticks not dispatched by the time the schedulers stopped
	redispatched          int             // measured ticks Dispatch returned nil for more than once (asynq deduped them)
	duplicates            int             // measured ticks the worker ran more than once
	notRun                int             // measured ticks the worker had not run when the drain ended
	win                   window          // ctrs: [0] scheduler clients, [1] enqueue clients
	stats                 scheduler.Stats // summed over replicas, whole cell
	drainTook             time.Duration
	setup                 time.Duration
	logs                  []string // the scheduler's warnings and errors, counted
}

// jobConfig generates the YAML of n "@every 1s" jobs and loads it.
func jobConfig(addr string, n int) (*batonconfig.Config, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "redis:\n  url: redis://%s/0\njobs:\n", addr)
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s, schedule: \"@every 1s\", handler: {name: noop}}\n", jobName(i))
	}
	return batonconfig.Load([]byte(b.String()))
}

func jobName(i int) string { return fmt.Sprintf("j%05d", i) }

// schedJobs converts the config's jobs to the scheduler's field by field,
// as a replica does (baton's schedulerJob, which a change there must be
// copied from): the scheduler is measured alone, without a replica around
// it.
func schedJobs(cfg *batonconfig.Config) []scheduler.Job {
	out := make([]scheduler.Job, 0, len(cfg.Jobs))
	for _, j := range cfg.Jobs {
		out = append(out, scheduler.Job{
			Name:             j.Name,
			Schedule:         j.Sched,
			StartingDeadline: j.StartingDeadline,
			Catchup:          j.Catchup,
			CatchupMax:       j.CatchupMax,
			Jitter:           j.Jitter,
			Paused:           j.Paused,
			LeaderOnly:       j.Leader,
			CommitFirst:      j.Mode == batonconfig.ModeLocal,
		})
	}
	return out
}

type replica struct {
	sched   *scheduler.Scheduler
	locks   *locking.Client
	clients []*redis.Client
	asynq   *asynq.Client
	done    chan struct{}
}

func (e *env) batonCell(nJobs, nRep int, withWorker bool) (batonResult, error) {
	res := batonResult{jobs: nJobs, replicas: nRep, ticks: e.cfg.ticks, worker: withWorker}
	logf("baton: %d jobs, %d replica(s), worker %v", nJobs, nRep, withWorker)
	if err := e.fresh(); err != nil {
		return res, err
	}
	t0 := time.Now()
	cfg, err := jobConfig(e.addr, nJobs)
	if err != nil {
		return res, err
	}
	sj := schedJobs(cfg)
	var w *workerProc
	if withWorker {
		if w, err = e.startWorker(); err != nil {
			return res, err
		}
	}
	workerStopped := w == nil
	defer func() {
		if !workerStopped {
			w.stop()
		}
	}()

	schedCtr, enqCtr := &counter{}, &counter{}
	rec := &dispatchRec{ticks: map[string]*dispatched{}}
	lc := newLogCounter()
	var reps []*replica
	defer func() {
		for _, r := range reps {
			_ = r.asynq.Close()
			_ = r.locks.Close()
			for _, c := range r.clients {
				_ = c.Close()
			}
		}
	}()
	for i := range nRep {
		lockRDB := newClient(e.addr, schedCtr)
		enqRDB := newClient(e.addr, enqCtr)
		r := &replica{clients: []*redis.Client{lockRDB, enqRDB}, done: make(chan struct{})}
		r.asynq = asynq.NewClientFromRedisClient(enqRDB)
		masters := []redis.UniversalClient{lockRDB}
		if r.locks, err = locking.NewQuorum(masters, locking.WithFreshDeployment()); err != nil {
			return res, err
		}
		reps = append(reps, r)
		// wired as baton run wires it: with the check across queues
		d := timedDispatcher{inner: handoff.New(cfg, r.asynq, nil, handoff.WithQueueRedis(enqRDB)), rec: rec}
		r.sched, err = scheduler.New(r.locks, sj, d,
			scheduler.WithReplica(fmt.Sprintf("r%d", i)),
			scheduler.WithLogger(slog.New(lc)),
			scheduler.WithNamespace(cfg.Namespace),
			scheduler.WithTickLeaseTTL(cfg.Scheduler.TickLeaseTTL),
			scheduler.WithMaxClockSkew(cfg.MaxClockSkew))
		if err != nil {
			return res, err
		}
	}
	res.setup = time.Since(t0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	for _, r := range reps {
		go func() {
			defer close(r.done)
			_ = r.sched.Run(ctx)
		}()
	}
	first := nextSecond(start.Add(e.cfg.warm))
	end := first.Add(time.Duration(e.cfg.ticks) * time.Second)
	logf("  started %d replica(s) (setup %v); measuring ticks %s .. %s", nRep, res.setup.Round(time.Millisecond),
		first.Format("15:04:05"), end.Add(-time.Second).Format("15:04:05"))

	sleepUntil(first.Add(-200 * time.Millisecond))
	a, err := e.snapshot(w, schedCtr, enqCtr)
	if err != nil {
		return res, err
	}
	sleepUntil(end.Add(-200 * time.Millisecond))
	b, err := e.snapshot(w, schedCtr, enqCtr)
	if err != nil {
		return res, err
	}
	res.win = diff(a, b)

	// measured tick IDs
	var ids []string
	for k := range e.cfg.ticks {
		at := first.Add(time.Duration(k) * time.Second).UTC()
		for i := range nJobs {
			ids = append(ids, scheduler.Tick{Job: jobName(i), At: at}.ID())
		}
	}
	// let the last measured tick finish dispatching (bounded), then stop
	allDispatched := func() bool {
		for _, id := range ids {
			if rec.get(id).n == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 200 && !allDispatched() && time.Since(end) < 10*time.Second; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	for _, r := range reps {
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			logf("  replica %s did not return within 20s of cancel", r.sched.Replica())
		}
	}
	for _, r := range reps {
		s := r.sched.Stats()
		res.stats.Owned += s.Owned
		res.stats.Done += s.Done
		res.stats.Busy += s.Busy
		res.stats.Missed += s.Missed
		res.stats.Dispatched += s.Dispatched
		res.stats.DispatchErrors += s.DispatchErrors
		res.stats.SkewStops += s.SkewStops
	}

	if w != nil {
		drainStart := time.Now()
		w.waitHandled(e.cfg.drain, func() bool {
			for _, id := range ids {
				if w.get(id).n == 0 && rec.get(id).n > 0 {
					return false
				}
			}
			return true
		})
		res.drainTook = time.Since(drainStart)
		w.stop()
		workerStopped = true
	}

	for _, id := range ids {
		d := rec.get(id)
		if d.n == 0 {
			res.missedDispatch++
		} else {
			res.dispatchLag = append(res.dispatchLag, d.first.Sub(d.at))
			res.dispatchCall = append(res.dispatchCall, d.call)
			if d.n > 1 {
				res.redispatched++
			}
		}
		if w == nil {
			continue
		}
		h := w.get(id)
		switch {
		case h.n == 0 && d.n > 0:
			res.notRun++
		case h.n > 1:
			res.duplicates++
		}
		if h.n > 0 && d.n > 0 {
			res.startLag = append(res.startLag, time.Unix(0, h.first).Sub(d.at))
		}
	}
	res.logs = lc.summary()
	for _, l := range res.logs {
		logf("  log: %s", l)
	}
	spans := schedCtr.spansCopy()
	if f := os.Getenv("SCHEDBENCH_SPANS"); f != "" {
		var b strings.Builder
		for _, sp := range spans {
			fmt.Fprintf(&b, "%v %d %d %d\n", sp.claim, sp.n, sp.start.Sub(start).Milliseconds(), sp.end.Sub(sp.start).Milliseconds())
		}
		_ = os.WriteFile(fmt.Sprintf("%s.%d.%d", f, nJobs, nRep), []byte(b.String()), 0o644)
	}
	for k := range e.cfg.ticks {
		at := first.Add(time.Duration(k) * time.Second)
		var claim, follower, commit time.Duration
		for _, sp := range spans {
			off := sp.start.Sub(at)
			if off < -10*time.Millisecond || off >= time.Second-10*time.Millisecond {
				continue
			}
			d := sp.end.Sub(at)
			switch {
			case !sp.claim:
				commit = max(commit, d)
				res.commitPipes++
			case off < 400*time.Millisecond:
				claim = max(claim, d)
			default:
				follower = max(follower, d)
			}
		}
		res.claimAt = append(res.claimAt, claim)
		if follower > 0 {
			res.followerAt = append(res.followerAt, follower)
		}
		res.commitAt = append(res.commitAt, commit)
	}
	logf("  done: %d ticks dispatched, %d missed, %d run twice, %d not run after %v drain; cmds/job-tick %.2f",
		len(res.dispatchLag), res.missedDispatch, res.duplicates, res.notRun, res.drainTook.Round(time.Millisecond),
		float64(res.win.ctrs[0].cmds+res.win.ctrs[1].cmds)/float64(nJobs*e.cfg.ticks))
	return res, nil
}
