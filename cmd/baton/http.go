package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// httpServer serves /healthz, /readyz and /metrics for the replicas of this
// process.
type httpServer struct {
	replicas []*replica
	draining atomic.Bool // set on shutdown: /readyz answers 503
	srv      *http.Server
	ln       net.Listener
	log      *slog.Logger

	// the readiness as last checked (every readyEvery, in the background):
	// a request costs no Redis round trip
	ready     atomic.Pointer[string] // "" ready, else the reasons
	stopCheck chan struct{}
	checkDone chan struct{}
}

// Limits of the HTTP listener: a slow or oversized client cannot hold a
// connection or memory.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second // a /metrics scrape
	httpIdleTimeout       = 60 * time.Second
	httpMaxHeaderBytes    = 16 << 10
	httpMaxBodyBytes      = 1 << 20
	readyEvery            = time.Second
)

// newHTTPServer listens on addr (so that a taken port fails at start) and
// returns the server; serve starts answering.
func newHTTPServer(addr string, replicas []*replica, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	h := &httpServer{replicas: replicas, ln: ln, log: log, stopCheck: make(chan struct{}), checkDone: make(chan struct{})}
	starting := "starting: readiness not checked yet"
	h.ready.Store(&starting)
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&statsCollector{replicas: replicas},
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	h.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, httpMaxBodyBytes)
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
	return h, nil
}

// Addr is the address the server listens on.
func (h *httpServer) Addr() string { return h.ln.Addr().String() }

// serve answers requests until shutdown; it returns nil after shutdown.
func (h *httpServer) serve() error {
	go h.checkLoop()
	defer func() { close(h.stopCheck); <-h.checkDone }()
	h.log.Info("http listening", "addr", h.Addr(), "paths", "/healthz /readyz /metrics")
	if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// shutdown stops the server, giving requests in flight a few seconds.
func (h *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
}

// checkLoop checks every replica's readiness (see replica.ready) now and
// every readyEvery, until serve returns.
func (h *httpServer) checkLoop() {
	defer close(h.checkDone)
	t := time.NewTicker(readyEvery)
	defer t.Stop()
	for {
		var reasons []string
		for _, rp := range h.replicas {
			if why := rp.ready(context.Background()); why != "" {
				reasons = append(reasons, why)
			}
		}
		r := strings.Join(reasons, "\n")
		h.ready.Store(&r)
		select {
		case <-h.stopCheck:
			return
		case <-t.C:
		}
	}
}

// readyz answers 200 "ok" when every replica was ready at the last check
// (at most readyEvery ago), 503 and the reasons otherwise; the reasons name
// no address.
func (h *httpServer) readyz(w http.ResponseWriter, _ *http.Request) {
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
}

// statsCollector exposes the scheduler's and the worker's counters of each
// replica, labelled with the replica id, read at scrape time.
type statsCollector struct {
	replicas []*replica
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
}

var heldDesc = prometheus.NewDesc("baton_scheduler_held_ticks",
	"Ticks held back now because the lock masters or the queue fail (claimed with the catch-up policy when they answer).", []string{"replica"}, nil)

var skewStopsDesc = prometheus.NewDesc("baton_scheduler_skew_stops_total",
	"Times this replica stopped claiming because of clock skew.", []string{"replica"}, nil)

var workerCounters = []counter[jobs.Stats]{
	newCounter("baton_worker_ran_total", "Runs that succeeded.", func(s jobs.Stats) float64 { return float64(s.Ran) }),
	newCounter("baton_worker_failed_total", "Runs that failed or could not start.", func(s jobs.Stats) float64 { return float64(s.Failed) }),
	newCounter("baton_worker_skipped_total", "Ticks skipped by the concurrency policy.", func(s jobs.Stats) float64 { return float64(s.Skipped) }),
	newCounter("baton_worker_replaced_total", "Runs stopped by a newer tick (concurrency: replace).", func(s jobs.Stats) float64 { return float64(s.Replaced) }),
}

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
	ch <- skewStopsDesc
	ch <- heldDesc
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rp := range c.replicas {
		if rp.sched != nil {
			for job, s := range rp.sched.JobStats() {
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
		}
		for job, w := range rp.worker.JobStats() {
			for _, k := range workerCounters {
				ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, k.get(w), rp.id, job)
			}
		}
	}
}
