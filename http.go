package baton

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/scheduler"
)

// ReadyEvery is how often an HTTPHandler checks its replicas' readiness.
const ReadyEvery = time.Second

// HTTPHandler serves, for the replicas of a process:
//
//   - GET /healthz: 200 "ok" while the process serves;
//   - GET /readyz: 200 "ok" when every replica was ready at the last check
//     (see Replica.Ready; checked every ReadyEvery in the background, so a
//     request costs no Redis round trip), else 503 and the reasons, which
//     name no address; 503 "shutting down" once Drain was called; a ready
//     replica whose lock master waits out its restart quarantine answers
//     "ok" and a line naming the master, why and until when;
//   - GET /metrics: Prometheus metrics of the schedulers and workers
//     (labelled with the replica id and the job), Go and process metrics;
//   - GET /: a dashboard of the deployment's jobs and replicas, and the
//     JSON API under /api/ (see api.go): status, history and locks to
//     read, pause, resume and trigger, the runtime schedules to list, put
//     and delete (schedules_api.go), behind http.token (the reads too,
//     unless http.public_reads);
//   - /queues/: the queue view a Go program adds with ServeQueues.
//
// Routes lists them. Only /healthz and /readyz answer a request whatever
// its Host header names; every other path answers only requests to an IP
// address, localhost, *.localhost or a name of http.hosts, and refuses the
// rest with 421 (a page whose DNS name was rebound to baton's address
// reaches no data through a browser).
//
// Mount it on the program's server (its limits and timeouts are the
// server's); Close it when done.
type HTTPHandler struct {
	mux      *http.ServeMux
	replicas []*Replica
	cluster  *Cluster                     // the API's view of the replicas' deployment; nil without replicas
	queues   atomic.Pointer[http.Handler] // the queue view (ServeQueues), nil without
	routes   []string                     // the patterns served (Routes)
	hosts    []string                     // http.hosts: the names answered besides IP addresses and localhost
	status   statusCache                  // /api/status answers, shared for a second
	draining atomic.Bool
	ready    atomic.Pointer[string] // "" ready, else the reasons
	waiting  atomic.Pointer[string] // what ready replicas wait for (Replica.Waiting), "" nothing
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewHTTPHandler returns the handler of replicas and starts its readiness
// checks.
func NewHTTPHandler(replicas ...*Replica) *HTTPHandler {
	h := &HTTPHandler{replicas: replicas, mux: http.NewServeMux(), stop: make(chan struct{}), done: make(chan struct{})}
	for _, r := range replicas {
		r.httpServed.Store(true)
	}
	starting := "starting: readiness not checked yet"
	h.ready.Store(&starting)
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
	h.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	h.handle("GET /readyz", http.HandlerFunc(h.readyz))
	h.handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if len(replicas) > 0 {
		// a Cluster only dials lazily; its config is valid (New took it)
		h.cluster, _ = NewCluster(replicas[0].cfg)
		h.hosts = replicas[0].cfg.HTTP.Hosts
	}
	h.mountAPI()
	go h.checkLoop()
	return h
}

// ServeHTTP implements http.Handler: a request to a name that is not the
// server's is refused (421) unless it probes /healthz or /readyz.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.ownName(r.Host) && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this server does not answer to the name %q: "+
			"use its IP address or localhost, or add the name to http.hosts in the config", truncate(r.Host, 100)))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// ownName reports whether host (a request's Host, with or without port) is
// an IP address, localhost, a name under localhost or one of http.hosts. A
// request without Host (HTTP/1.0) passes: browsers always send one.
func (h *HTTPHandler) ownName(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")), ".")
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, n := range h.hosts {
		if n == name || (strings.HasPrefix(n, "*.") && strings.HasSuffix(name, n[1:])) {
			return true
		}
	}
	return false
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Drain makes /readyz answer 503 "shutting down" from now on: call it when
// the replicas start to stop, so load balancers look elsewhere.
func (h *HTTPHandler) Drain() { h.draining.Store(true) }

// Close stops the readiness checks.
func (h *HTTPHandler) Close() {
	h.once.Do(func() {
		close(h.stop)
		if h.cluster != nil {
			h.cluster.Close()
		}
		if q := h.queues.Load(); q != nil {
			if c, ok := (*q).(io.Closer); ok {
				_ = c.Close()
			}
		}
	})
	<-h.done
}

// checkLoop checks every replica's readiness now and every ReadyEvery,
// until Close.
func (h *HTTPHandler) checkLoop() {
	defer close(h.done)
	t := time.NewTicker(ReadyEvery)
	defer t.Stop()
	for {
		var reasons, waiting []string
		for _, r := range h.replicas {
			if why := r.Ready(context.Background()); why != "" {
				reasons = append(reasons, why)
			}
			if w := r.Waiting(); w != "" {
				waiting = append(waiting, w)
			}
		}
		s := strings.Join(reasons, "\n")
		h.ready.Store(&s)
		w := strings.Join(waiting, "\n")
		h.waiting.Store(&w)
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// readyz answers 200 "ok" when every replica was ready at the last check,
// 503 and the reasons otherwise. A ready replica that waits (a lock master
// in its restart quarantine: Replica.Waiting) is still ready, as it serves
// the API and will claim once the master votes: "ok" is followed by what it
// waits for.
func (h *HTTPHandler) readyz(w http.ResponseWriter, _ *http.Request) {
	reasons := *h.ready.Load()
	if h.draining.Load() {
		reasons = "shutting down"
	}
	if reasons != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, reasons)
		return
	}
	fmt.Fprintln(w, "ok")
	if waiting := h.waiting.Load(); waiting != nil && *waiting != "" {
		fmt.Fprintln(w, *waiting)
	}
}

// statsCollector exposes the scheduler's and the worker's counters of each
// replica, labelled with the replica id, read at scrape time.
type statsCollector struct {
	replicas []*Replica
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

var heldDesc = prometheus.NewDesc("baton_scheduler_held_ticks",
	"Ticks held back now because the lock masters or the queue fail (claimed with the catch-up policy when they answer).", []string{"replica"}, nil)

var skewStopsDesc = prometheus.NewDesc("baton_scheduler_skew_stops_total",
	"Times this replica stopped claiming because of clock skew.", []string{"replica"}, nil)

var workerCounters = []counter[worker.Stats]{
	newCounter("baton_worker_ran_total", "Runs that succeeded.", func(s worker.Stats) float64 { return float64(s.Ran) }),
	newCounter("baton_worker_failed_total", "Runs that failed or could not start.", func(s worker.Stats) float64 { return float64(s.Failed) }),
	newCounter("baton_worker_skipped_total", "Ticks skipped by the concurrency policy.", func(s worker.Stats) float64 { return float64(s.Skipped) }),
	newCounter("baton_worker_replaced_total", "Runs stopped by a newer tick (concurrency: replace).", func(s worker.Stats) float64 { return float64(s.Replaced) }),
	newCounter("baton_worker_dropped_total", "Ticks of a buffering job dropped because its buffer was full.", func(s worker.Stats) float64 { return float64(s.Dropped) }),
}

var (
	schedulesDesc = prometheus.NewDesc("baton_schedules",
		"Runtime schedules this replica holds and runs (the job list's jobs not counted).", []string{"replica"}, nil)
	schedulesRefusedDesc = prometheus.NewDesc("baton_schedules_refused",
		"Runtime schedules stored in Redis that this replica refuses to run: not signed with the signing keys, corrupt, or not valid for its config (baton status names them).", []string{"replica"}, nil)
	schedulesWentBackDesc = prometheus.NewDesc("baton_schedules_store_went_back_total",
		"Times this replica found the runtime schedule store gone back (the queue Redis restarted without persistence, or from an older snapshot) and put back what it had read.", []string{"replica"}, nil)
)

var refusedDesc = prometheus.NewDesc("baton_worker_tasks_refused_total",
	"Tasks this replica's worker refused and archived without running them, by reason: bad_task (unsigned, forged or misplaced), too_old (past its expiry: a copy put back into a queue), done (its tick's task ended already), paused, job_done (past the job's end, at or max_runs), outside_window (before the job's start).",
	[]string{"replica", "reason"}, nil)

var skewedDesc = prometheus.NewDesc("baton_scheduler_clock_skewed",
	"1 while this replica's clock is off Redis TIME beyond max_clock_skew (it does not claim).", []string{"replica"}, nil)

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range schedulerCounters {
		ch <- k.desc
	}
	for _, k := range workerCounters {
		ch <- k.desc
	}
	ch <- skewedDesc
	ch <- refusedDesc
	ch <- skewStopsDesc
	ch <- heldDesc
	for _, k := range lockCounters {
		ch <- k.desc
	}
	ch <- leaderDesc
	ch <- skewDesc
	ch <- infoDesc
	ch <- quarantineDesc
	ch <- clusterLeaderDesc
	ch <- schedulesDesc
	ch <- schedulesRefusedDesc
	ch <- schedulesWentBackDesc
	for _, rp := range c.replicas {
		for _, m := range rp.metrics.collectors() {
			m.Describe(ch)
		}
	}
}

// byLabel sums stats by their job label (config.MetricJob): the runtime
// schedules the config does not name count together.
func byLabel(cfg *config.Config, stats map[string]scheduler.Stats) map[string]scheduler.Stats {
	out := make(map[string]scheduler.Stats, len(stats))
	for job, s := range stats {
		l := cfg.MetricJob(job)
		if l == job {
			out[l] = s
			continue
		}
		out[l] = addStats(out[l], s)
	}
	return out
}

// addStats returns the sum of the counters of a and b.
func addStats(a, b scheduler.Stats) scheduler.Stats {
	return scheduler.Stats{Owned: a.Owned + b.Owned, Done: a.Done + b.Done, Busy: a.Busy + b.Busy, Missed: a.Missed + b.Missed,
		Paused: a.Paused + b.Paused, Dispatched: a.Dispatched + b.Dispatched, DispatchErrors: a.DispatchErrors + b.DispatchErrors,
		CaughtUp: a.CaughtUp + b.CaughtUp, SkewStops: a.SkewStops + b.SkewStops, Early: a.Early + b.Early,
		CommitErrors: a.CommitErrors + b.CommitErrors, LeftToOthers: a.LeftToOthers + b.LeftToOthers, Held: a.Held + b.Held}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rp := range c.replicas {
		if rp.sched != nil {
			for job, s := range byLabel(rp.cfg, rp.sched.JobStats()) {
				for _, k := range schedulerCounters {
					ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, k.get(s), rp.id, job)
				}
			}
			total := rp.sched.Stats()
			ch <- prometheus.MustNewConstMetric(skewStopsDesc, prometheus.CounterValue, float64(total.SkewStops), rp.id)
			ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(total.Held), rp.id)
			skewed := 0.0
			if rp.sched.Skewed() {
				skewed = 1
			}
			ch <- prometheus.MustNewConstMetric(skewedDesc, prometheus.GaugeValue, skewed, rp.id)
			ch <- prometheus.MustNewConstMetric(skewDesc, prometheus.GaugeValue, rp.sched.ClockSkew().Seconds(), rp.id)
		}
		if rp.lockStats != nil {
			ls := rp.lockStats()
			for _, k := range lockCounters {
				ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, k.get(ls), rp.id)
			}
		}
		if rp.singles != nil {
			for _, job := range rp.singles.Leading() {
				ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, 1, rp.id, job)
			}
		}
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, rp.id, rp.version, rp.role.String(), rp.listHash)
		rp.collectMasters(ch)
		rp.collectLeader(ch)
		for _, m := range rp.metrics.collectors() {
			m.Collect(ch)
		}
		for job, w := range rp.worker.JobStats() {
			for _, k := range workerCounters {
				ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, k.get(w), rp.id, job)
			}
		}
		if rp.follower != nil {
			ch <- prometheus.MustNewConstMetric(schedulesDesc, prometheus.GaugeValue, float64(rp.follower.Len()), rp.id)
			ch <- prometheus.MustNewConstMetric(schedulesRefusedDesc, prometheus.GaugeValue, float64(len(rp.follower.Refused())), rp.id)
			ch <- prometheus.MustNewConstMetric(schedulesWentBackDesc, prometheus.CounterValue, float64(rp.follower.WentBackCount()), rp.id)
		}
		for reason, n := range rp.worker.Refusals() {
			ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(n), rp.id, string(reason))
		}
	}
}
