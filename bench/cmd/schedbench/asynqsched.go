package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// enqRec maps the task IDs asynq's Scheduler enqueued to (job, enqueue time).
type enqRec struct {
	mu    sync.Mutex
	tasks map[string]enqueued
}

type enqueued struct {
	job string
	at  time.Time
}

func (e *env) asynqSchedCell(nJobs, nRep int) (tickResult, error) {
	res := tickResult{name: "asynq Scheduler", jobs: nJobs, replicas: nRep, ticks: e.cfg.ticks}
	logf("asynq Scheduler: %d tasks \"@every 1s\", %d replicas", nJobs, nRep)
	if err := e.fresh(); err != nil {
		return res, err
	}
	w, err := e.startWorker()
	if err != nil {
		return res, err
	}
	workerStopped := false
	defer func() {
		if !workerStopped {
			w.stop()
		}
	}()
	ctr := &counter{}
	rec := &enqRec{tasks: map[string]enqueued{}}
	var clients []*redis.Client
	var scheds []*asynq.Scheduler
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	shutdown := func() {
		var wg sync.WaitGroup
		for _, s := range scheds {
			wg.Go(s.Shutdown)
		}
		ch := make(chan struct{})
		go func() { wg.Wait(); close(ch) }()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			logf("  asynq scheduler shutdown took over 20s; going on")
		}
		scheds = nil
	}
	defer shutdown()
	for range nRep {
		rdb := newClient(e.addr, ctr)
		clients = append(clients, rdb)
		s := asynq.NewSchedulerFromRedisClient(rdb, &asynq.SchedulerOpts{
			Logger:   quietAsynq{},
			LogLevel: asynq.FatalLevel,
			PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
				if err != nil || info == nil {
					return
				}
				now := time.Now()
				rec.mu.Lock()
				rec.tasks[info.ID] = enqueued{job: string(info.Payload), at: now}
				rec.mu.Unlock()
			},
		})
		scheds = append(scheds, s)
		for i := range nJobs {
			if _, err := s.Register("@every 1s", asynq.NewTask("bench:asynqsched", []byte(jobName(i)))); err != nil {
				return res, err
			}
		}
	}
	start := time.Now()
	for _, s := range scheds {
		if err := s.Start(); err != nil {
			return res, err
		}
	}
	first := nextSecond(start.Add(1500 * time.Millisecond)) // one warm-up tick
	end := first.Add(time.Duration(e.cfg.ticks) * time.Second)
	logf("  measuring %s .. %s", first.Format("15:04:05"), end.Add(-time.Second).Format("15:04:05"))
	sleepUntil(first.Add(-200 * time.Millisecond))
	a, err := e.snapshot(w, ctr)
	if err != nil {
		return res, err
	}
	sleepUntil(end.Add(-200 * time.Millisecond))
	b, err := e.snapshot(w, ctr)
	if err != nil {
		return res, err
	}
	res.win = diff(a, b)
	sleepUntil(end.Add(500 * time.Millisecond))
	shutdown()

	// the tasks of the measured seconds, by (job, second of enqueue)
	rec.mu.Lock()
	byTick := map[string][]string{}
	firstEnq := map[string]time.Time{}
	for id, t := range rec.tasks {
		k := runKey(t.job, t.at.Truncate(time.Second))
		byTick[k] = append(byTick[k], id)
		if f, ok := firstEnq[k]; !ok || t.at.Before(f) {
			firstEnq[k] = t.at
		}
	}
	rec.mu.Unlock()
	var keys []string
	var ats []time.Time
	for k := range e.cfg.ticks {
		at := first.Add(time.Duration(k) * time.Second)
		for i := range nJobs {
			keys = append(keys, runKey(jobName(i), at))
			ats = append(ats, at)
		}
	}
	drainStart := time.Now()
	w.waitHandled(e.cfg.drain, func() bool {
		for _, k := range keys {
			for _, id := range byTick[k] {
				if w.get(id).n == 0 {
					return false
				}
			}
		}
		return true
	})
	res.drainTook = time.Since(drainStart)
	w.stop()
	workerStopped = true
	for n, k := range keys {
		ids := byTick[k]
		res.enqueues += len(ids)
		runs := 0
		var firstRun int64
		for _, id := range ids {
			h := w.get(id)
			runs += h.n
			if h.n > 0 && (firstRun == 0 || h.first < firstRun) {
				firstRun = h.first
			}
		}
		res.runs += runs
		switch {
		case runs == 0:
			res.missed++
		case runs > 1:
			res.duplicates++
		}
		if f, ok := firstEnq[k]; ok {
			res.enqLag = append(res.enqLag, f.Sub(ats[n]))
		}
		if firstRun != 0 {
			res.startLag = append(res.startLag, time.Unix(0, firstRun).Sub(ats[n]))
		}
	}
	logf("  done: %d enqueues and %d runs of %d job-ticks, %d duplicated, %d missed", res.enqueues, res.runs,
		nJobs*e.cfg.ticks, res.duplicates, res.missed)
	if res.enqueues == 0 {
		return res, fmt.Errorf("no enqueue recorded")
	}
	return res, nil
}

// quietAsynq drops asynq's log lines: its Scheduler logs an error at every
// Shutdown when it was given a shared go-redis client.
type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"asynq scheduler fatal:"}, args...)...)
	os.Exit(1)
}
