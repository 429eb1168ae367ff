package batonhttp

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// metricsHandler serves GET /metrics: the replicas' Stats (statsCollector),
// Go's and the process's metrics.
func metricsHandler(replicas []*baton.Replica) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		// the memstats series, and the live heap as the last GC marked it
		// (go_gc_heap_live_bytes): the figure a leak shows in, which
		// go_memstats_heap_alloc_bytes hides under the garbage of the cycle
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&statsCollector{replicas: replicas},
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// statsCollector exposes the Stats of each replica as Prometheus metrics,
// read at scrape time, labelled with the replica id.
type statsCollector struct {
	replicas []*baton.Replica
}

// counter is one exported counter and how to read it.
type counter[S any] struct {
	desc *prometheus.Desc
	get  func(S) float64
}

// newCounter is a counter per replica and job (the job list bounds the
// label's values).
func newCounter[S any](name, help string, get func(S) float64) counter[S] {
	return counter[S]{prometheus.NewDesc(name, help, []string{"replica", "job"}, nil), get}
}

// newReplicaCounter is a counter per replica.
func newReplicaCounter[S any](name, help string, get func(S) float64) counter[S] {
	return counter[S]{prometheus.NewDesc(name, help, []string{"replica"}, nil), get}
}

var schedulerCounters = []counter[scheduler.Stats]{
	newCounter("baton_scheduler_owned_total", "Tick claims this replica won.", func(s scheduler.Stats) float64 { return float64(s.Owned) }),
	newCounter("baton_scheduler_done_total", "Tick claims that found the tick already dispatched.", func(s scheduler.Stats) float64 { return float64(s.Done) }),
	newCounter("baton_scheduler_busy_total", "Tick claims that found another replica's lease.", func(s scheduler.Stats) float64 { return float64(s.Busy) }),
	newCounter("baton_scheduler_missed_total", "Ticks past their starting deadline.", func(s scheduler.Stats) float64 { return float64(s.Missed) }),
	newCounter("baton_scheduler_paused_total", "Ticks skipped because the job was paused.", func(s scheduler.Stats) float64 { return float64(s.Paused) }),
	newCounter("baton_scheduler_dispatched_total", "Ticks this replica dispatched.", func(s scheduler.Stats) float64 { return float64(s.Dispatched) }),
	newCounter("baton_scheduler_dispatch_errors_total", "Dispatches that failed (the tick was released for another try).", func(s scheduler.Stats) float64 { return float64(s.DispatchErrors) }),
	newCounter("baton_scheduler_caught_up_total", "Missed ticks dispatched by the catch-up policy.", func(s scheduler.Stats) float64 { return float64(s.CaughtUp) }),
	newCounter("baton_scheduler_early_total", "Tick claims refused as not due yet by a lock master's clock.", func(s scheduler.Stats) float64 { return float64(s.Early) }),
	newCounter("baton_scheduler_commit_errors_total", "Ticks not recorded on a quorum of lock masters.", func(s scheduler.Stats) float64 { return float64(s.CommitErrors) }),
	newCounter("baton_scheduler_left_to_others_total", "Ticks released unrecorded because another live replica's job list takes them and this one's does not (a rolling deploy).", func(s scheduler.Stats) float64 { return float64(s.LeftToOthers) }),
}

var workerCounters = []counter[baton.WorkerStats]{
	newCounter("baton_worker_ran_total", "Runs that succeeded.", func(s baton.WorkerStats) float64 { return float64(s.Ran) }),
	newCounter("baton_worker_failed_total", "Runs that failed or could not start.", func(s baton.WorkerStats) float64 { return float64(s.Failed) }),
	newCounter("baton_worker_skipped_total", "Ticks skipped by the concurrency policy.", func(s baton.WorkerStats) float64 { return float64(s.Skipped) }),
	newCounter("baton_worker_replaced_total", "Runs stopped by a newer tick (concurrency: replace).", func(s baton.WorkerStats) float64 { return float64(s.Replaced) }),
	newCounter("baton_worker_dropped_total", "Ticks of a buffering job dropped because its buffer was full.", func(s baton.WorkerStats) float64 { return float64(s.Dropped) }),
}

var lockCounters = []counter[locking.Stats]{
	newReplicaCounter("baton_lock_acquisitions_total", "Leases granted to this replica (execution leases, elections, fences).",
		func(s locking.Stats) float64 { return float64(s.Acquired) }),
	newReplicaCounter("baton_lock_extensions_total", "Lease extensions a quorum confirmed.",
		func(s locking.Stats) float64 { return float64(s.Extended) }),
	newReplicaCounter("baton_lock_extension_failures_total", "Lease extensions a quorum did not confirm.",
		func(s locking.Stats) float64 { return float64(s.ExtendFailed) }),
	newReplicaCounter("baton_lock_leases_lost_total", "Leases that ended because the lock was lost.",
		func(s locking.Stats) float64 { return float64(s.Lost) }),
	newReplicaCounter("baton_lock_wait_seconds_total", "Time spent waiting for locks that were then granted.",
		func(s locking.Stats) float64 { return s.Waited.Seconds() }),
}

// The scheduler's gauges and totals.
var (
	heldDesc = prometheus.NewDesc("baton_scheduler_held_ticks",
		"Ticks held back now because the lock masters or the queue fail (claimed with the catch-up policy when they answer).", []string{"replica"}, nil)
	skewStopsDesc = prometheus.NewDesc("baton_scheduler_skew_stops_total",
		"Times this replica stopped claiming because of clock skew.", []string{"replica"}, nil)
	skewedDesc = prometheus.NewDesc("baton_scheduler_clock_skewed",
		"1 while this replica's clock is off Redis TIME beyond max_clock_skew (it does not claim).", []string{"replica"}, nil)
	skewDesc = prometheus.NewDesc("baton_scheduler_clock_skew_seconds",
		"How far this replica's clock was ahead of the lock masters' at the last check (negative: behind).", []string{"replica"}, nil)
)

// The replica's, its lock masters' and its leaderships'.
var (
	infoDesc = prometheus.NewDesc("baton_replica_info",
		"1, labelled with the replica's version, role and job-list hash (replicas whose hashes differ run different job lists).",
		[]string{"replica", "version", "role", "job_list"}, nil)
	quarantineDesc = prometheus.NewDesc("baton_lock_master_quarantine_remaining_seconds",
		"How long the lock master (by its index in locking.masters) still waits out its restart quarantine, as this replica last found it: it does not vote meanwhile; 0 while it votes.",
		[]string{"replica", "master"}, nil)
	leaderDesc = prometheus.NewDesc("baton_singleton_leader",
		"1 for each singleton job this replica leads now.", []string{"replica", "job"}, nil)
	clusterLeaderDesc = prometheus.NewDesc("baton_cluster_leader",
		"1 while this replica is the cluster leader (it claims the ticks of leader: true jobs), 0 otherwise; served by replicas whose job list has such a job.",
		[]string{"replica"}, nil)
)

// The worker's refusals and the runtime schedules.
var (
	refusedDesc = prometheus.NewDesc("baton_worker_tasks_refused_total",
		"Tasks this replica's worker refused and archived without running them, by reason: bad_task (unsigned, forged or misplaced), too_old (past its expiry: a copy put back into a queue), done (its tick's task ended already), paused, job_done (past the job's end, at or max_runs), outside_window (before the job's start).",
		[]string{"replica", "reason"}, nil)
	schedulesDesc = prometheus.NewDesc("baton_schedules",
		"Runtime schedules this replica holds and runs (the job list's jobs not counted).", []string{"replica"}, nil)
	schedulesRefusedDesc = prometheus.NewDesc("baton_schedules_refused",
		"Runtime schedules stored in Redis that this replica refuses to run: not signed with the signing keys, corrupt, or not valid for its config (baton status names them).", []string{"replica"}, nil)
	schedulesWentBackDesc = prometheus.NewDesc("baton_schedules_store_went_back_total",
		"Times this replica found the runtime schedule store gone back (the queue Redis restarted without persistence, or from an older snapshot) and put back what it had read.", []string{"replica"}, nil)
)

// The measures of each job's ticks and runs (baton.JobMeasures).
var (
	dispatchLagDesc = prometheus.NewDesc("baton_scheduler_dispatch_lag_seconds",
		"From a tick's due instant to its dispatch by this replica.", []string{"replica", "job"}, nil)
	startLagDesc = prometheus.NewDesc("baton_worker_start_lag_seconds",
		"From a tick's due instant to the start of its run on this replica.", []string{"replica", "job"}, nil)
	runsDesc = prometheus.NewDesc("baton_worker_runs_total",
		"Runs (and ticks that did not start) on this replica, by how they ended: ok, failed, skipped, replaced, dropped, timed out, lease lost.",
		[]string{"replica", "job", "status"}, nil)
	durationDesc = prometheus.NewDesc("baton_worker_run_duration_seconds",
		"How long runs on this replica ran, by how they ended.", []string{"replica", "job", "status"}, nil)
	lastOKDesc = prometheus.NewDesc("baton_worker_last_success_timestamp_seconds",
		"When a run of the job last succeeded on this replica (Unix time).", []string{"replica", "job"}, nil)
	intervalDesc = prometheus.NewDesc("baton_job_interval_seconds",
		"The shortest interval between two ticks of the job's schedule (its alert windows scale with it).", []string{"replica", "job"}, nil)
)

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range schedulerCounters {
		ch <- k.desc
	}
	for _, k := range workerCounters {
		ch <- k.desc
	}
	for _, k := range lockCounters {
		ch <- k.desc
	}
	for _, d := range []*prometheus.Desc{heldDesc, skewStopsDesc, skewedDesc, skewDesc, infoDesc, quarantineDesc, leaderDesc,
		clusterLeaderDesc, refusedDesc, schedulesDesc, schedulesRefusedDesc, schedulesWentBackDesc,
		dispatchLagDesc, startLagDesc, runsDesc, durationDesc, lastOKDesc, intervalDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rp := range c.replicas {
		s := rp.Stats()
		id := s.ID
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{id}, labels...)...)
		}
		count := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{id}, labels...)...)
		}
		if sc := s.Scheduler; sc != nil {
			for job, js := range sc.Jobs {
				for _, k := range schedulerCounters {
					count(k.desc, k.get(js), job)
				}
			}
			count(skewStopsDesc, float64(sc.Total.SkewStops))
			gauge(heldDesc, float64(sc.Total.Held))
			gauge(skewedDesc, oneIf(sc.Skewed))
			gauge(skewDesc, sc.ClockSkew.Seconds())
		}
		for _, k := range lockCounters {
			count(k.desc, k.get(s.Locks))
		}
		for _, job := range s.Singletons {
			gauge(leaderDesc, 1, job)
		}
		gauge(infoDesc, 1, s.Version, s.Role.String(), s.JobList)
		for _, m := range s.Masters {
			gauge(quarantineDesc, m.Quarantine.Seconds(), strconv.Itoa(m.Index))
		}
		if s.LeaderJobs {
			gauge(clusterLeaderDesc, oneIf(s.ClusterLeader))
		}
		for job, jm := range s.Jobs {
			collectMeasures(ch, id, job, jm)
		}
		for job, w := range s.Worker {
			for _, k := range workerCounters {
				count(k.desc, k.get(w), job)
			}
		}
		gauge(schedulesDesc, float64(s.Schedules.Count))
		gauge(schedulesRefusedDesc, float64(s.Schedules.Refused))
		count(schedulesWentBackDesc, float64(s.Schedules.WentBack))
		for reason, n := range s.Refused {
			count(refusedDesc, float64(n), reason)
		}
	}
}

// collectMeasures sends what replica measured of job's ticks and runs.
func collectMeasures(ch chan<- prometheus.Metric, replica, job string, jm baton.JobMeasures) {
	histogram := func(d *prometheus.Desc, h *baton.Histogram, labels ...string) {
		if h == nil {
			return
		}
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b] = h.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets, append([]string{replica}, labels...)...)
	}
	histogram(dispatchLagDesc, jm.DispatchLag, job)
	histogram(startLagDesc, jm.StartLag, job)
	for status, rm := range jm.Runs {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.CounterValue, float64(rm.Count), replica, job, string(status))
		histogram(durationDesc, rm.Duration, job, string(status))
	}
	if !jm.LastSuccess.IsZero() {
		ch <- prometheus.MustNewConstMetric(lastOKDesc, prometheus.GaugeValue, float64(jm.LastSuccess.UnixNano())/1e9, replica, job)
	}
	if jm.Interval > 0 {
		ch <- prometheus.MustNewConstMetric(intervalDesc, prometheus.GaugeValue, jm.Interval.Seconds(), replica, job)
	}
}

// oneIf is 1 for true, 0 for false.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
