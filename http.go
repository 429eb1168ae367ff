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
