package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	batonconfig "github.com/batonhq/baton/config"
	"github.com/batonhq/baton/jobs"
)

// batonStarts records the first start of every (schedule, tick) by the
// handler, and how many starts each had, and every dispatch.
type batonStarts struct {
	mu       sync.Mutex
	first    map[tickKey]time.Time
	runs     map[tickKey]int
	dispatch map[tickKey][]time.Time
}

// dispatched notes a dispatch's return (baton.WithDispatchObserver).
func (s *batonStarts) dispatched(job string, lag time.Duration) {
	now := time.Now()
	id, _ := batonconfig.ScheduleID(job)
	k := tickKey{id, now.Add(-lag).Round(time.Second).Unix()}
	s.mu.Lock()
	s.dispatch[k] = append(s.dispatch[k], now)
	s.mu.Unlock()
}

func (s *batonStarts) handle(_ context.Context, run jobs.Run) error {
	now := time.Now()
	id, _ := batonconfig.ScheduleID(run.Job)
	k := tickKey{id, run.Tick.Unix()}
	s.mu.Lock()
	if _, ok := s.first[k]; !ok {
		s.first[k] = now
	}
	s.runs[k]++
	s.mu.Unlock()
	return nil
}

// runBaton is baton's cell: cfg.schedules runtime schedules put through
// Cluster.PutSchedule on one redis-server (cluster: a 3-primary Redis
// Cluster, the schedules in 16 shards, each queue in 12 lanes),
// cfg.replicas replicas (scheduler and worker, in this process) running a
// Go handler, all schedules on the same epoch-aligned period, cfg.instants
// measured instants. A tick's dispatch time is the return of its hand-off
// into asynq (baton.WithDispatchObserver); its start is the handler's
// first call.
func runBaton(ctx context.Context, cfg cellConfig, cluster bool) (cellResult, error) {
	res := cellResult{system: "baton runtime schedules", schedules: cfg.schedules, replicas: cfg.replicas}
	spec := fmt.Sprintf("@every %ds", int(cfg.period.Seconds()))
	where := "one redis-server"
	if cluster {
		res.system = "baton runtime schedules, Redis Cluster"
		where = fmt.Sprintf("a Redis Cluster of %d primaries (schedules.shards %d, worker.lanes %d)", clusterPrimaries, clusterShards, clusterLanes)
	}
	res.runsWith = fmt.Sprintf("baton on %s; N schedules `%s` put with Cluster.PutSchedule (Go handler, 16 putters); %d replicas (scheduler and worker, one process), worker concurrency %d",
		where, spec, cfg.replicas, cfg.workers)
	admins, redisConf, err := batonRedis(cluster)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, a := range admins {
			_ = a.close()
		}
	}()
	conf, err := batonconfig.Load(fmt.Appendf(nil, `%s
locking: {fresh_deployment: true}
namespace: rb
worker: {concurrency: %d, lanes: %d}
history: {start_after: %s}
jobs: []
`, redisConf, cfg.workers, workerLanes(cluster), cfg.startAfter))
	if err != nil {
		return res, err
	}
	if _, err := baton.InitLayout(ctx, conf, nil); err != nil {
		return res, err
	}
	cl, err := baton.NewCluster(conf)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	memBefore, err := usedMemoryAll(ctx, admins)
	if err != nil {
		return res, err
	}

	// the N schedules, before the replicas start: a deployment's
	// customers' schedules are there when it restarts
	logf("baton: putting %d schedules", cfg.schedules)
	began := time.Now()
	// no tick before the first measured instant: one the puts and the
	// replicas' start leave time for (an unmeasured instant of N ticks
	// would only load the measured ones)
	lead := cfg.period
	if cfg.startLead > 0 {
		lead = cfg.startLead
	}
	startAt := nextInstant(began.Add(lead+cfg.settle), cfg.period)
	if err := putAll(ctx, cl, cfg.schedules, spec, startAt, cfg.deadline); err != nil {
		return res, err
	}
	res.addTook = time.Since(began)
	memIdle, err := usedMemoryAll(ctx, admins)
	if err != nil {
		return res, err
	}
	logf("baton: put in %v; starting %d replicas", res.addTook.Round(time.Millisecond), cfg.replicas)

	starts := &batonStarts{first: map[tickKey]time.Time{}, runs: map[tickKey]int{}, dispatch: map[tickKey][]time.Time{}}
	reg := jobs.NewRegistry()
	reg.Register("tick", jobs.HandlerFunc(starts.handle))
	rssBefore := rssKiB(os.Getpid())
	cpuBefore := cpuTime()
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var replicas []*baton.Replica
	var wg sync.WaitGroup
	defer func() {
		stop()
		bounded("baton replicas' shutdown", 60*time.Second, wg.Wait)
	}()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	syncBegan := time.Now()
	for i := range cfg.replicas {
		r, err := baton.New(conf, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("b%d", i)),
			baton.WithLogger(quiet), baton.WithDispatchObserver(starts.dispatched))
		if err != nil {
			return res, err
		}
		replicas = append(replicas, r)
		wg.Go(func() {
			if err := r.Run(rctx); err != nil {
				logf("baton: replica %s: %v", r.ID(), err)
			}
		})
	}
	for _, r := range replicas {
		for r.Schedules() < cfg.schedules {
			if time.Since(syncBegan) > 5*time.Minute {
				return res, fmt.Errorf("replica %s holds %d of %d schedules after 5m", r.ID(), r.Schedules(), cfg.schedules)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	syncTook := time.Since(syncBegan)
	rssSynced := rssKiB(os.Getpid())
	cpuSynced := cpuTime()
	logf("baton: every replica holds the %d schedules after %v", cfg.schedules, syncTook.Round(time.Millisecond))

	// put-to-visible: a put's return to the moment every replica holds it
	visible, err := putToVisible(ctx, cl, replicas, spec, 200)
	if err != nil {
		return res, err
	}

	first := nextInstant(time.Now().Add(cfg.settle), cfg.period)
	if first.Before(startAt) {
		first = startAt
	}
	var instants []time.Time
	for k := range cfg.instants {
		instants = append(instants, first.Add(time.Duration(k)*cfg.period))
	}
	last := instants[len(instants)-1]
	// Redis's idle cost (followers, pollers, a Cluster's bus), measured
	// until a second before the first instant, is subtracted from the
	// instants' Redis CPU
	idleFrom, idleBefore, err := time.Now(), []time.Duration(nil), error(nil)
	if idleBefore, err = redisCPUs(admins); err != nil {
		return res, err
	}
	if err := sleepUntil(ctx, first.Add(-time.Second)); err != nil {
		return res, err
	}
	idleAfter, err := redisCPUs(admins)
	if err != nil {
		return res, err
	}
	idleFor := time.Since(idleFrom)
	logf("baton: measuring instants %s .. %s", first.Format("15:04:05"), last.Format("15:04:05"))
	cpuInstants := cpuTime()
	redisBefore, err := redisCPUs(admins)
	if err != nil {
		return res, err
	}
	statsBefore, err := commandStats(admins)
	if err != nil {
		return res, err
	}
	measuredFrom := time.Now()
	if path := os.Getenv("RUNBENCH_CPUPROFILE"); path != "" {
		// the instants' profile, for a look at where baton spends them
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if err := sleepUntil(ctx, last.Add(min(cfg.period/2, 30*time.Second))); err != nil {
		return res, err
	}
	logf("baton: waiting for every tick to start (up to %v)", cfg.drain)
	drainEnd := time.Now().Add(cfg.drain)
	for time.Now().Before(drainEnd) {
		starts.mu.Lock()
		n := len(starts.first)
		starts.mu.Unlock()
		if n >= cfg.schedules*len(instants) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	cpuRan := cpuTime()
	redisAfter, err := redisCPUs(admins)
	if err != nil {
		return res, err
	}
	measuredFor := time.Since(measuredFrom)
	statsAfter, err := commandStats(admins)
	if err != nil {
		return res, err
	}
	rssRan := rssKiB(os.Getpid())
	memRan, err := usedMemoryAll(ctx, admins)
	if err != nil {
		return res, err
	}
	steady := "(per-key sizes: measured on one redis-server only)"
	if !cluster {
		if steady, err = steadyPerSchedule(ctx, admins[0].rdb, min(cfg.schedules, 200)); err != nil {
			return res, err
		}
	}
	obs := map[tickKey]*tickObs{}
	starts.mu.Lock()
	for k, at := range starts.dispatch {
		obs[k] = &tickObs{dispatched: len(at), firstDispatch: slices.MinFunc(at, func(a, b time.Time) int { return a.Compare(b) })}
	}
	for k, st := range starts.first {
		o := obs[k]
		if o == nil {
			o = &tickObs{}
			obs[k] = o
		}
		o.runs, o.firstStart = starts.runs[k], st
	}
	starts.mu.Unlock()
	for _, at := range instants {
		res.instants = append(res.instants, tally(at, "", cfg.schedules, obs))
	}
	per := func(b int64) string { return fmt.Sprintf("%.0f B", float64(b)/float64(cfg.schedules)) }
	res.memory = append(res.memory,
		fmt.Sprintf("Redis per idle schedule: %s (used_memory %d → %d B after the puts, before any tick)", per(memIdle-memBefore), memBefore, memIdle),
		fmt.Sprintf("Redis per schedule after %d ticks each: %s (used_memory %d B: definitions, each schedule's history of its runs (schedules.history 3), the ticks' records and completed tasks while they are retained)",
			len(instants), per(memRan-memBefore), memRan),
		steady,
		fmt.Sprintf("replicas (one process, %d replicas): RSS %d → %d MiB to hold the schedules (%.0f KiB per 1000 schedules per replica), %d MiB after the ticks ran",
			cfg.replicas, rssBefore>>10, rssSynced>>10, float64(rssSynced-rssBefore)/float64(cfg.replicas)/float64(cfg.schedules)*1000, rssRan>>10),
		fmt.Sprintf("CPU (the process: %d replicas, the putters' Cluster excluded): %.1f s to read and check the N schedules at start (%v wall), %.1f s for the %d instants (claims, dispatches, %d runs)",
			cfg.replicas, (cpuSynced-cpuBefore).Seconds(), syncTook.Round(time.Millisecond), (cpuRan-cpuInstants).Seconds(), len(instants), cfg.schedules*len(instants)))
	res.notes = append(res.notes,
		fmt.Sprintf("put-to-visible (a put's return to the moment all %d replicas hold it), %d puts with the N schedules in place: p50 %s s, p99 %s s, max %s s",
			cfg.replicas, len(visible), secs(pct(visible, 50)), secs(pct(visible, 99)), secs(slices.Max(visible))),
		"dispatch is the return of the replica's hand-off into asynq (baton.WithDispatchObserver); start is the handler's first call",
		redisCPUNote(redisBefore, redisAfter, idleBefore, idleAfter, idleFor, measuredFor, cfg.schedules*len(instants)),
		commandNote(statsBefore, statsAfter, cfg.schedules*len(instants)))
	return res, nil
}

// putAll puts schedules 0..n-1, starting at start, with 16 putters, with
// progress lines. deadline is their starting deadline (0: the default).
func putAll(ctx context.Context, cl *baton.Cluster, n int, spec string, start time.Time, deadline time.Duration) error {
	var next, done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				_, err := cl.PutSchedule(ctx, schedID(i), baton.ScheduleSpec{Schedule: spec, Start: start, Handler: "tick",
					Payload: []byte(`{"tenant":` + strconv.Itoa(i) + `}`), StartingDeadline: deadline})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if d := done.Add(1); d%20000 == 0 {
					logf("baton: %d of %d put", d, n)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}

// putToVisible puts m more schedules, one at a time, and returns for each
// the time from the put's return until every replica holds it.
func putToVisible(ctx context.Context, cl *baton.Cluster, replicas []*baton.Replica, spec string, m int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range m {
		s, err := cl.PutSchedule(ctx, fmt.Sprintf("visible-%04d", i), baton.ScheduleSpec{Schedule: "@yearly", Handler: "tick"})
		if err != nil {
			return nil, err
		}
		put := time.Now()
		for _, r := range replicas {
			for r.ScheduleChange(s.ID) < s.Change {
				if time.Since(put) > 30*time.Second {
					return nil, fmt.Errorf("replica %s: put %d not visible after 30s", r.ID(), s.Change)
				}
				time.Sleep(time.Millisecond)
			}
		}
		out = append(out, time.Since(put))
		_ = spec
	}
	return out, nil
}

// steadyPerSchedule sums, over the keys of the first m schedules, the
// MEMORY USAGE of those that stay between ticks (no ttl, or one longer than
// an hour: not a tick's record, a retained task or a lease), and of their
// history lists, divided by the runs each holds: what an idle schedule
// costs once its history is full, with its share of the hash of
// definitions and of the sorted set of ids.
func steadyPerSchedule(ctx context.Context, rdb *redis.Client, m int) (string, error) {
	var hist, runs, defs, lists int64
	kinds := map[string]int64{}
	for i := range m {
		id := schedID(i)
		// the keys a schedule has between ticks (docs/operating.md's key
		// table): its history list, its mark and fence on the lock master
		// (here the same Redis), and its pause when paused
		job := "@" + id
		keys := []string{"rb:{history:" + job + "}:list", "rb:{" + job + "}:mark", "rb:{" + job + "}:fence", "rb:{" + job + "}:paused"}
		for _, k := range keys {
			n, err := rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				continue // absent
			}
			if strings.Contains(k, "{history:") {
				hist += n
				runs += listRuns(ctx, rdb, k)
				lists++
				continue
			}
			kinds[k[strings.LastIndex(k, "}")+1:]] += n
		}
	}
	// the definitions' share: the whole hash and sorted set of ids, each
	// measured entry by entry (SAMPLES 0), over the schedules they hold
	for _, k := range []string{"rb:{schedules}:defs", "rb:{schedules}:ids"} {
		n, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return "", fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		defs += n
	}
	held, err := rdb.HLen(ctx, "rb:{schedules}:defs").Result()
	if err != nil || held == 0 {
		return "", fmt.Errorf("HLEN of the definitions: %d, %v", held, err)
	}
	defs = defs * int64(m) / held
	base := defs
	parts := []string{fmt.Sprintf("definition and id %d B", defs/int64(m))}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		base += kinds[k]
		parts = append(parts, fmt.Sprintf("%s %d B", k, kinds[k]/int64(m)))
	}
	b := float64(base) / float64(m)
	perList := float64(hist) / float64(max(lists, 1))
	return fmt.Sprintf("Redis per idle schedule, steady state (MEMORY USAGE of the keys of %d schedules between ticks; tick records, leases and retained tasks left out): %.0f B: %s, and its history list %.0f B (%.1f runs kept, schedules.history %d)",
		m, b+perList, strings.Join(parts, ", "), perList, float64(runs)/float64(max(lists, 1)), batonHistory), nil
}

// listRuns is how many runs a history list holds: its distinct run ids
// (a run writes one entry, or two when it outlasts history.start_after).
func listRuns(ctx context.Context, rdb *redis.Client, key string) int64 {
	elems, _ := rdb.LRange(ctx, key, 0, -1).Result()
	ids := map[string]bool{}
	for _, e := range elems {
		if m := listRunID.FindStringSubmatch(e); m != nil {
			ids[m[1]] = true
		}
	}
	return int64(len(ids))
}

var listRunID = regexp.MustCompile(`^\S+ \[(?:"v","[^"]*",)?(?:"(?:e|ev)","[^"]*",)?"(?:t|tick)","[^"]*","(?:r|R|run)","([^"]+)"`)

// batonHistory is schedules.history's default.
const batonHistory = 3

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
