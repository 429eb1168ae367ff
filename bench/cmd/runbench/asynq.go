package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/bench/internal/redisinfo"
	"github.com/batonhq/baton/internal/redistest"
)

// asynqTaskType is the type of every scheduled task; the payload is the
// schedule's id.
const asynqTaskType = "runbench:tick"

// schedulesProvider lists the N schedules, as a provider backed by a
// customer table would.
type schedulesProvider struct {
	n     int
	calls atomic.Int64
}

// GetConfigs returns one config per schedule, all on "* * * * *".
func (p *schedulesProvider) GetConfigs() ([]*asynq.PeriodicTaskConfig, error) {
	p.calls.Add(1)
	out := make([]*asynq.PeriodicTaskConfig, p.n)
	for i := range p.n {
		out[i] = &asynq.PeriodicTaskConfig{Cronspec: "* * * * *", Task: asynq.NewTask(asynqTaskType, []byte(schedID(i)))}
	}
	return out, nil
}

// asynqRec is what the schedulers enqueued and the worker started.
type asynqRec struct {
	mu       sync.Mutex
	enq      map[string]enqueued  // task id -> schedule and time
	started  map[string]time.Time // task id -> first start
	runs     map[string]int       // task id -> starts
	errAt    []time.Time          // enqueue errors (no task id, no schedule known)
	firstErr string
}

type enqueued struct {
	id string
	at time.Time
}

// usedMemory is INFO memory's used_memory.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// runAsynq is the asynq cell: one redis-server, one asynq worker server,
// and 3 PeriodicTaskManagers over the same provider of N schedules, all on
// "* * * * *" (asynq's cron has minutes only).
func runAsynq(ctx context.Context, cfg cellConfig) (cellResult, error) {
	res := cellResult{system: "asynq PeriodicTaskManager", schedules: cfg.schedules, replicas: cfg.replicas}
	res.runsWith = fmt.Sprintf("asynq v0.26.0 on one redis-server; %d PeriodicTaskManagers (own go-redis client each, default SyncInterval 3m) over one provider of N configs `* * * * *`; one asynq Server, Concurrency %d, TaskCheckInterval 20ms",
		cfg.replicas, cfg.workers)
	redis.SetLogger(quietRedis{})
	srv, err := redistest.Start()
	if err != nil {
		return res, err
	}
	defer func() { _ = srv.Close() }()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer func() { _ = admin.Close() }()
	pid, _ := redisinfo.PID(admin)
	logf("asynq: redis-server %s (pid %d)", srv.Addr(), pid)

	rec := &asynqRec{enq: map[string]enqueued{}, started: map[string]time.Time{}, runs: map[string]int{}}
	workerRdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: cfg.workers + 10})
	defer func() { _ = workerRdb.Close() }()
	worker := asynq.NewServerFromRedisClient(workerRdb, asynq.Config{
		Concurrency:       cfg.workers,
		TaskCheckInterval: 20 * time.Millisecond,
		Logger:            quietAsynq{},
		LogLevel:          asynq.FatalLevel,
	})
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		now := time.Now()
		id, _ := asynq.GetTaskID(ctx)
		rec.mu.Lock()
		if _, ok := rec.started[id]; !ok {
			rec.started[id] = now
		}
		rec.runs[id]++
		rec.mu.Unlock()
		return nil
	})
	if err := worker.Start(handler); err != nil {
		return res, err
	}
	workerStopped := false
	stopWorker := func() {
		if !workerStopped {
			workerStopped = true
			bounded("asynq worker shutdown", 30*time.Second, worker.Shutdown)
		}
	}
	defer stopWorker()
	time.Sleep(time.Second)
	memBefore, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}

	prov := &schedulesProvider{n: cfg.schedules}
	var mgrs []*asynq.PeriodicTaskManager
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	shutdown := func() {
		var wg sync.WaitGroup
		for _, m := range mgrs {
			wg.Go(m.Shutdown)
		}
		bounded("asynq PeriodicTaskManager shutdown", 60*time.Second, wg.Wait)
		mgrs = nil
	}
	defer shutdown()
	logf("asynq: starting %d PeriodicTaskManagers with %d schedules each", cfg.replicas, cfg.schedules)
	began := time.Now()
	for range cfg.replicas {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		clients = append(clients, rdb)
		m, err := asynq.NewPeriodicTaskManager(asynq.PeriodicTaskManagerOpts{
			PeriodicTaskConfigProvider: prov,
			RedisUniversalClient:       rdb,
			SchedulerOpts: &asynq.SchedulerOpts{
				Logger:   quietAsynq{},
				LogLevel: asynq.FatalLevel,
				PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
					now := time.Now()
					rec.mu.Lock()
					defer rec.mu.Unlock()
					if err != nil || info == nil {
						rec.errAt = append(rec.errAt, now)
						if err != nil && rec.firstErr == "" {
							rec.firstErr = err.Error()
						}
						return
					}
					rec.enq[info.ID] = enqueued{id: string(info.Payload), at: now}
				},
			},
		})
		if err != nil {
			return res, err
		}
		if err := m.Start(); err != nil {
			return res, err
		}
		mgrs = append(mgrs, m)
	}
	res.addTook = time.Since(began)
	logf("asynq: managers started in %v; waiting for the schedulers' first heartbeat (entries written to Redis)", res.addTook.Round(time.Millisecond))
	hbBy := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := admin.ZCard(cctx, "asynq:schedulers").Result()
		cancel()
		if err == nil && n >= int64(cfg.replicas) {
			break
		}
		if time.Now().After(hbBy) {
			return res, fmt.Errorf("asynq schedulers wrote no entries within 30s (%d of %d, %v)", n, cfg.replicas, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(time.Second)
	memSched, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}

	const period = time.Minute
	first := nextInstant(time.Now().Add(cfg.settle), period)
	var instants []time.Time
	for k := range cfg.instants {
		instants = append(instants, first.Add(time.Duration(k)*period))
	}
	last := instants[len(instants)-1]
	logf("asynq: measuring instants %s .. %s", first.Format("15:04:05"), last.Format("15:04:05"))
	if err := sleepUntil(ctx, last.Add(period/2)); err != nil {
		return res, err
	}
	memRunning, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}
	shutdown()
	logf("asynq: waiting for the worker to start every task (up to %v)", cfg.drain)
	drainEnd := time.Now().Add(cfg.drain)
	for time.Now().Before(drainEnd) {
		rec.mu.Lock()
		waiting := 0
		for id := range rec.enq {
			if _, ok := rec.started[id]; !ok {
				waiting++
			}
		}
		rec.mu.Unlock()
		if waiting == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	memAfter, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}
	stopWorker()

	obs := map[tickKey]*tickObs{}
	rec.mu.Lock()
	for tid, e := range rec.enq {
		k := tickKey{e.id, e.at.Truncate(period).Unix()}
		o := obs[k]
		if o == nil {
			o = &tickObs{}
			obs[k] = o
		}
		o.dispatched++
		if o.firstDispatch.IsZero() || e.at.Before(o.firstDispatch) {
			o.firstDispatch = e.at
		}
		if st, ok := rec.started[tid]; ok {
			o.runs += rec.runs[tid]
			if o.firstStart.IsZero() || st.Before(o.firstStart) {
				o.firstStart = st
			}
		}
	}
	errAt, firstErr := rec.errAt, rec.firstErr
	late := 0
	for _, e := range rec.enq {
		if e.at.Sub(e.at.Truncate(period)) > period*5/6 {
			late++
		}
	}
	rec.mu.Unlock()
	for _, at := range instants {
		r := tally(at, "", cfg.schedules, obs)
		for _, e := range errAt {
			if e.Truncate(period).Equal(at) {
				r.dispatchErrors++
			}
		}
		res.instants = append(res.instants, r)
	}
	res.memory = append(res.memory,
		fmt.Sprintf("Redis per schedule, registered: %.0f B (used_memory %d → %d B with %d schedulers' entry lists written; each replica writes all N entries)",
			float64(memSched-memBefore)/float64(cfg.schedules), memBefore, memSched, cfg.replicas),
		fmt.Sprintf("Redis per schedule 30s after the last instant, managers running: %.0f B (used_memory %d B: the entry lists, which each replica's heartbeat rewrites every 10s with a 20s TTL, and each entry's enqueue history, up to 1000 events per entry)",
			float64(memRunning-memBefore)/float64(cfg.schedules), memRunning),
		fmt.Sprintf("Redis per schedule after the managers stopped and the tasks ran: %.0f B (used_memory %d B: Shutdown clears the entry lists and the enqueue history; completed tasks are deleted)",
			float64(memAfter-memBefore)/float64(cfg.schedules), memAfter))
	if len(errAt) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d enqueue errors (PostEnqueueFunc with an error; counted under the instant of the error), first: %s. "+
			"Each manager's go-redis client has go-redis's defaults: PoolSize 10 × GOMAXPROCS, PoolTimeout 4s; the N cron entries of a replica enqueue at once",
			len(errAt), firstErr))
	}
	if late > 0 {
		res.notes = append(res.notes, fmt.Sprintf("**%d enqueues came over 50s after their minute began**: tasks carry no due time, so a tick is the minute of its enqueue, and these may be counted under the next instant", late))
	}
	res.notes = append(res.notes,
		"every PeriodicTaskManager runs its own Scheduler over the whole list: each replica enqueues every tick (no Unique or TaskID option set, as in asynq's PeriodicTaskManager example)",
		fmt.Sprintf("provider GetConfigs calls: %d (one per manager at start; the next sync is after SyncInterval)", prov.calls.Load()))
	return res, nil
}

// bounded runs fn, giving up waiting for it after d.
func bounded(what string, d time.Duration, fn func()) {
	ch := make(chan struct{})
	go func() { fn(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
		logf("  %s took over %v; going on", what, d)
	}
}

// quietRedis drops go-redis's log lines (connections closed under a pool
// timeout at shutdown).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// quietAsynq drops asynq's log lines but a fatal one.
type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"asynq fatal:"}, args...)...)
	os.Exit(1)
}
