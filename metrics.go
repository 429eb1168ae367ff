package baton

import (
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/replicastats"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// replicaMetrics are what a replica measures as things happen, by job
// label (config.MetricJob): the dispatch and start lags, the runs by how
// they ended with their durations, each job's last success and shortest
// interval. The counters of its parts are read from their Stats when
// Replica.Stats is called.
type replicaMetrics struct {
	dispatchLag *replicastats.Family[string, replicastats.Histogram]
	startLag    *replicastats.Family[string, replicastats.Histogram]
	runs        *replicastats.Family[runKey, atomic.Uint64]
	duration    *replicastats.Family[runKey, replicastats.Histogram]
	lastOK      *replicastats.Family[string, atomic.Int64] // Unix ns of a job's last successful run on this replica
	interval    map[string]time.Duration                   // a scheduled job's shortest interval between ticks; set before any read
	cfg         *config.Config                             // its labels: config.MetricJob
}

// runKey is a run's labels: its job's and how it ended.
type runKey struct {
	job    string
	status jobs.Status
}

// lagBuckets span a few milliseconds (a tick claimed at once) to a minute
// (a tick caught up late); durationBuckets a millisecond to a day.
var (
	lagBuckets      = replicastats.ExponentialBucketsRange(0.001, 60, 16)
	durationBuckets = replicastats.ExponentialBucketsRange(0.001, 86400, 20)
)

// newReplicaMetrics returns the empty measures of a replica of cfg, with
// each scheduled job's shortest interval.
func newReplicaMetrics(cfg *config.Config) *replicaMetrics {
	histogram := func(bounds []float64) func() *replicastats.Histogram {
		return func() *replicastats.Histogram { return replicastats.NewHistogram(bounds) }
	}
	m := &replicaMetrics{
		dispatchLag: replicastats.NewFamily[string](histogram(lagBuckets)),
		startLag:    replicastats.NewFamily[string](histogram(lagBuckets)),
		runs:        replicastats.NewFamily[runKey](func() *atomic.Uint64 { return new(atomic.Uint64) }),
		duration:    replicastats.NewFamily[runKey](histogram(durationBuckets)),
		lastOK:      replicastats.NewFamily[string](func() *atomic.Int64 { return new(atomic.Int64) }),
		interval:    map[string]time.Duration{},
		cfg:         cfg,
	}
	now := time.Now()
	for i := range cfg.Jobs {
		if j := &cfg.Jobs[i]; j.Sched != nil {
			if d := scheduler.ShortestInterval(j.Sched, now); d > 0 {
				m.interval[j.Name] = d
			}
		}
	}
	return m
}

// dispatched observes a dispatch's lag.
func (m *replicaMetrics) dispatched(job string, lag time.Duration) {
	m.dispatchLag.Get(m.label(job)).Observe(max(lag, 0).Seconds())
}

// ran observes a run's end.
func (m *replicaMetrics) ran(o worker.RunObservation) {
	job := m.label(o.Job)
	k := runKey{job, o.Status}
	m.runs.Get(k).Add(1)
	if o.Status == jobs.StatusOK {
		m.lastOK.Get(job).Store(time.Now().UnixNano())
	}
	if o.Took > 0 {
		m.startLag.Get(job).Observe(max(o.StartLag, 0).Seconds())
		m.duration.Get(k).Observe(o.Took.Seconds())
	}
}

// label is job's label (config.MetricJob): runtime schedules count
// together unless the config names them.
func (m *replicaMetrics) label(job string) string {
	return m.cfg.MetricJob(job)
}

// jobs reads the measures, by job label.
func (m *replicaMetrics) jobs() map[string]JobMeasures {
	out := map[string]JobMeasures{}
	at := func(job string) JobMeasures {
		jm, ok := out[job]
		if !ok {
			jm.Runs = map[jobs.Status]RunMeasures{}
		}
		return jm
	}
	for job, d := range m.interval {
		jm := at(job)
		jm.Interval = d
		out[job] = jm
	}
	m.dispatchLag.Each(func(job string, h *replicastats.Histogram) {
		jm := at(job)
		jm.DispatchLag = histogramOf(h)
		out[job] = jm
	})
	m.startLag.Each(func(job string, h *replicastats.Histogram) {
		jm := at(job)
		jm.StartLag = histogramOf(h)
		out[job] = jm
	})
	m.lastOK.Each(func(job string, ns *atomic.Int64) {
		jm := at(job)
		jm.LastSuccess = time.Unix(0, ns.Load())
		out[job] = jm
	})
	// the durations first: a run is counted before its duration is
	// observed, so each duration read has its count
	m.duration.Each(func(k runKey, h *replicastats.Histogram) {
		jm := at(k.job)
		rm := jm.Runs[k.status]
		rm.Duration = histogramOf(h)
		jm.Runs[k.status] = rm
		out[k.job] = jm
	})
	m.runs.Each(func(k runKey, n *atomic.Uint64) {
		jm := at(k.job)
		rm := jm.Runs[k.status]
		rm.Count = n.Load()
		jm.Runs[k.status] = rm
		out[k.job] = jm
	})
	return out
}

// histogramOf reads h.
func histogramOf(h *replicastats.Histogram) *Histogram {
	s := h.Snapshot()
	return &Histogram{Bounds: s.Bounds, Cumulative: s.Cumulative, Count: s.Count, Sum: s.Sum}
}
