package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsyncLocker adapts redsync to gocron's Locker: one redsync Mutex per
// run, named after the job (gocron passes the job's name as the key), held
// while the job runs.
type redsyncLocker struct {
	rs     *redsync.Redsync
	opts   []redsync.Option
	failed *atomic.Int64
}

func (l *redsyncLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	m := l.rs.NewMutex("gocron:"+key, l.opts...)
	if err := m.LockContext(ctx); err != nil {
		l.failed.Add(1)
		return nil, err
	}
	return redsyncLock{m}, nil
}

type redsyncLock struct{ m *redsync.Mutex }

func (l redsyncLock) Unlock(ctx context.Context) error {
	_, err := l.m.UnlockContext(ctx)
	return err
}

type gocronVariant struct {
	name     string
	triesOne bool
}

// runRec counts runs per (job, second): the second is the run's start time
// truncated to the second (a run more than 1s late is counted in the next
// second).
type runRec struct {
	mu   sync.Mutex
	runs map[string]*handled
}

func (r *runRec) add(key string, ns int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.runs[key]
	if h == nil {
		h = &handled{first: ns}
		r.runs[key] = h
	}
	h.n++
	if ns < h.first {
		h.first = ns
	}
}

func (r *runRec) get(key string) handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.runs[key]; h != nil {
		return *h
	}
	return handled{}
}

func runKey(job string, sec time.Time) string { return job + "@" + sec.UTC().Format(time.RFC3339) }

// tickResult is one cell of a peer scheduler: runs per (job, tick).
type tickResult struct {
	name                  string
	jobs, replicas, ticks int
	startLag              []time.Duration // due -> first run (or first enqueue, asynq)
	enqLag                []time.Duration // asynq Scheduler: due -> first enqueue
	runs                  int             // runs (handler starts) of measured job-ticks
	enqueues              int             // asynq Scheduler: enqueues of measured job-ticks
	duplicates            int             // measured job-ticks run more than once
	missed                int             // measured job-ticks never run
	lockErrors            int64           // gocron: lock attempts that failed (whole cell)
	win                   window          // ctrs[0]: the library's clients
	drainTook             time.Duration
}

func (e *env) gocronCell(nJobs int, v gocronVariant) (tickResult, error) {
	const nRep = 3
	res := tickResult{name: "gocron + " + v.name, jobs: nJobs, replicas: nRep, ticks: e.cfg.ticks}
	logf("gocron (%s): %d jobs, %d schedulers", v.name, nJobs, nRep)
	if err := e.fresh(); err != nil {
		return res, err
	}
	ctr := &counter{}
	var lockFailed atomic.Int64
	rec := &runRec{runs: map[string]*handled{}}
	var clients []*redis.Client
	var scheds []gocron.Scheduler
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	shutdown := func() {
		var wg sync.WaitGroup
		for _, s := range scheds {
			wg.Go(func() { _ = s.Shutdown() })
		}
		ch := make(chan struct{})
		go func() { wg.Wait(); close(ch) }()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			logf("  gocron shutdown took over 20s; going on")
		}
		scheds = nil
	}
	defer shutdown()

	// first run: a whole second far enough ahead to register every job
	// (gocron rejects a start time in the past); it is the warm-up tick.
	startAt := nextSecond(time.Now().Add(2*time.Second + time.Duration(nJobs)*nRep*20*time.Microsecond))
	for range nRep {
		rdb := newClient(e.addr, ctr)
		clients = append(clients, rdb)
		l := &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), failed: &lockFailed}
		if v.triesOne {
			l.opts = []redsync.Option{redsync.WithTries(1)}
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l), gocron.WithLocation(time.UTC),
			gocron.WithStopTimeout(10*time.Second))
		if err != nil {
			return res, err
		}
		scheds = append(scheds, s)
		for i := range nJobs {
			name := jobName(i)
			_, err := s.NewJob(gocron.DurationJob(time.Second),
				gocron.NewTask(func() {
					now := time.Now()
					rec.add(runKey(name, now.Truncate(time.Second)), now.UnixNano())
				}),
				gocron.WithName(name),
				gocron.WithStartAt(gocron.WithStartDateTime(startAt)))
			if err != nil {
				return res, fmt.Errorf("NewJob %s: %w", name, err)
			}
		}
	}
	for _, s := range scheds {
		s.Start()
	}
	first := startAt.Add(time.Second) // one warm-up tick
	if w := nextSecond(time.Now().Add(500 * time.Millisecond)); w.After(first) {
		first = w
	}
	end := first.Add(time.Duration(e.cfg.ticks) * time.Second)
	logf("  first run %s; measuring %s .. %s", startAt.Format("15:04:05"), first.Format("15:04:05"), end.Add(-time.Second).Format("15:04:05"))
	sleepUntil(first.Add(-200 * time.Millisecond))
	a, err := e.snapshot(nil, ctr)
	if err != nil {
		return res, err
	}
	sleepUntil(end.Add(-200 * time.Millisecond))
	b, err := e.snapshot(nil, ctr)
	if err != nil {
		return res, err
	}
	res.win = diff(a, b)
	// runs of the last measured second may still be waiting on redsync retries
	sleepUntil(end.Add(time.Second))
	drainStart := time.Now()
	shutdown()
	res.drainTook = time.Since(drainStart)
	res.lockErrors = lockFailed.Load()

	for k := range e.cfg.ticks {
		at := first.Add(time.Duration(k) * time.Second)
		for i := range nJobs {
			h := rec.get(runKey(jobName(i), at))
			res.runs += h.n
			switch {
			case h.n == 0:
				res.missed++
			case h.n > 1:
				res.duplicates++
			}
			if h.n > 0 {
				res.startLag = append(res.startLag, time.Unix(0, h.first).Sub(at))
			}
		}
	}
	logf("  done: %d runs of %d job-ticks, %d duplicated, %d missed, %d lock errors", res.runs, nJobs*e.cfg.ticks,
		res.duplicates, res.missed, res.lockErrors)
	return res, nil
}
