package baton

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// replicaMetrics are the histograms a replica observes as things happen
// (the counters are read from its parts' Stats at scrape time). Each
// carries the replica id as a constant label, so the replicas of one
// process share metric names.
type replicaMetrics struct {
	dispatchLag *prometheus.HistogramVec
	startLag    *prometheus.HistogramVec
	runs        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	lastOK      *prometheus.GaugeVec // a job's last successful run on this replica
	interval    *prometheus.GaugeVec // a job's shortest interval between ticks
	cfg         *config.Config       // its labels: config.MetricJob
}

// lagBuckets span a few milliseconds (a tick claimed at once) to a minute
// (a tick caught up late); durationBuckets a millisecond to a day.
var (
	lagBuckets      = prometheus.ExponentialBucketsRange(0.001, 60, 16)
	durationBuckets = prometheus.ExponentialBucketsRange(0.001, 86400, 20)
)

func newReplicaMetrics(id string) *replicaMetrics {
	l := prometheus.Labels{"replica": id}
	return &replicaMetrics{
		dispatchLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_scheduler_dispatch_lag_seconds",
			Help: "From a tick's due instant to its dispatch by this replica.", Buckets: lagBuckets, ConstLabels: l}, []string{"job"}),
		startLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_worker_start_lag_seconds",
			Help: "From a tick's due instant to the start of its run on this replica.", Buckets: lagBuckets, ConstLabels: l}, []string{"job"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_worker_runs_total",
			Help:        "Runs (and ticks that did not start) on this replica, by how they ended: ok, failed, skipped, replaced, dropped, timed out, lease lost.",
			ConstLabels: l}, []string{"job", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_worker_run_duration_seconds",
			Help: "How long runs on this replica ran, by how they ended.", Buckets: durationBuckets, ConstLabels: l}, []string{"job", "status"}),
		lastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_worker_last_success_timestamp_seconds",
			Help: "When a run of the job last succeeded on this replica (Unix time).", ConstLabels: l}, []string{"job"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_job_interval_seconds",
			Help: "The shortest interval between two ticks of the job's schedule (its alert windows scale with it).", ConstLabels: l}, []string{"job"}),
	}
}

// intervals publishes each scheduled job's shortest interval, and keeps
// cfg for the labels.
func (m *replicaMetrics) intervals(cfg *config.Config) {
	m.cfg = cfg
	now := time.Now()
	for i := range cfg.Jobs {
		if j := &cfg.Jobs[i]; j.Sched != nil {
			if d := scheduler.ShortestInterval(j.Sched, now); d > 0 {
				m.interval.WithLabelValues(j.Name).Set(d.Seconds())
			}
		}
	}
}

// dispatched observes a dispatch's lag.
func (m *replicaMetrics) dispatched(job string, lag time.Duration) {
	m.dispatchLag.WithLabelValues(m.label(job)).Observe(max(lag, 0).Seconds())
}

// ran observes a run's end.
func (m *replicaMetrics) ran(o worker.RunObservation) {
	st := string(o.Status)
	job := m.label(o.Job)
	m.runs.WithLabelValues(job, st).Inc()
	if o.Status == jobs.StatusOK {
		m.lastOK.WithLabelValues(job).SetToCurrentTime()
	}
	if o.Took > 0 {
		m.startLag.WithLabelValues(job).Observe(max(o.StartLag, 0).Seconds())
		m.duration.WithLabelValues(job, st).Observe(o.Took.Seconds())
	}
}

// label is job's label (config.MetricJob): runtime schedules count
// together unless the config names them.
func (m *replicaMetrics) label(job string) string {
	if m.cfg == nil {
		return job
	}
	return m.cfg.MetricJob(job)
}

func (m *replicaMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.dispatchLag, m.startLag, m.runs, m.duration, m.lastOK, m.interval}
}

var (
	lockCounters = []counter[locking.Stats]{
		{prometheus.NewDesc("baton_lock_acquisitions_total", "Leases granted to this replica (execution leases, elections, fences).", []string{"replica"}, nil),
			func(s locking.Stats) float64 { return float64(s.Acquired) }},
		{prometheus.NewDesc("baton_lock_extensions_total", "Lease extensions a quorum confirmed.", []string{"replica"}, nil),
			func(s locking.Stats) float64 { return float64(s.Extended) }},
		{prometheus.NewDesc("baton_lock_extension_failures_total", "Lease extensions a quorum did not confirm.", []string{"replica"}, nil),
			func(s locking.Stats) float64 { return float64(s.ExtendFailed) }},
		{prometheus.NewDesc("baton_lock_leases_lost_total", "Leases that ended because the lock was lost.", []string{"replica"}, nil),
			func(s locking.Stats) float64 { return float64(s.Lost) }},
		{prometheus.NewDesc("baton_lock_wait_seconds_total", "Time spent waiting for locks that were then granted.", []string{"replica"}, nil),
			func(s locking.Stats) float64 { return s.Waited.Seconds() }},
	}
	leaderDesc = prometheus.NewDesc("baton_singleton_leader",
		"1 for each singleton job this replica leads now.", []string{"replica", "job"}, nil)
	skewDesc = prometheus.NewDesc("baton_scheduler_clock_skew_seconds",
		"How far this replica's clock was ahead of the lock masters' at the last check (negative: behind).", []string{"replica"}, nil)
	infoDesc = prometheus.NewDesc("baton_replica_info",
		"1, labelled with the replica's version, role and job-list hash (replicas whose hashes differ run different job lists).",
		[]string{"replica", "version", "role", "job_list"}, nil)
	quarantineDesc = prometheus.NewDesc("baton_lock_master_quarantine_remaining_seconds",
		"How long the lock master (by its index in locking.masters) still waits out its restart quarantine, as this replica last found it: it does not vote meanwhile; 0 while it votes.",
		[]string{"replica", "master"}, nil)
	clusterLeaderDesc = prometheus.NewDesc("baton_cluster_leader",
		"1 while this replica is the cluster leader (it claims the ticks of leader: true jobs), 0 otherwise; served by replicas whose job list has such a job.",
		[]string{"replica"}, nil)
)

// collectMasters sends, for each lock master, how long it still waits out
// its restart quarantine (Replica.Waiting says why). It contacts no master.
func (r *Replica) collectMasters(ch chan<- prometheus.Metric) {
	if r.lockGroup == nil {
		return
	}
	now := time.Now()
	for _, m := range r.lockGroup.Known() {
		left := 0.0
		if m.State == quorum.StateQuarantine {
			left = max(m.UntilLocal.Sub(now), 0).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(quarantineDesc, prometheus.GaugeValue, left, r.id, strconv.Itoa(m.Idx))
	}
}

// collectLeader sends whether this replica is the cluster leader, when its
// job list has leader jobs.
func (r *Replica) collectLeader(ch chan<- prometheus.Metric) {
	if r.leader == nil {
		return
	}
	v := 0.0
	if r.leader.leading() {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(clusterLeaderDesc, prometheus.GaugeValue, v, r.id)
}
