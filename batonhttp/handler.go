package batonhttp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
)

// ReadyEvery is how often a Handler checks its replicas' readiness.
const ReadyEvery = time.Second

// Handler serves, for the replicas of a process:
//
//   - GET /healthz: 200 "ok" while the process serves;
//   - GET /readyz: 200 "ok" when every replica was ready at the last check
//     (see baton.Replica.Ready; checked every ReadyEvery in the
//     background, so a request costs no Redis round trip), else 503 and the
//     reasons, which name no address; 503 "shutting down" once Drain was
//     called; a ready replica whose lock master waits out its restart
//     quarantine answers "ok" and a line naming the master, why and until
//     when;
//   - GET /metrics: Prometheus metrics of the schedulers and workers
//     (baton.Replica.Stats, labelled with the replica id and the job), Go
//     and process metrics;
//   - GET /: a dashboard of the deployment's jobs and replicas, and the
//     JSON API under /api/: status, history and locks to read, pause,
//     resume and trigger, the runtime schedules to list, put and delete,
//     behind http.token (the reads too, unless http.public_reads);
//   - /queues/: the queue view a Go program adds with ServeQueues.
//
// Routes lists them; routes.go is the table. Only /healthz and /readyz
// answer a request whatever its Host header names; every other path
// answers only requests to an IP address, localhost, *.localhost or a name
// of http.hosts, and refuses the rest with 421 (a page whose DNS name was
// rebound to baton's address reaches no data through a browser).
//
// Mount it on the program's server (its limits and timeouts are the
// server's); Close it when done.
type Handler struct {
	mux      *http.ServeMux
	replicas []*baton.Replica
	cluster  *baton.Cluster               // the API's view of the replicas' deployment; nil without replicas
	metrics  http.Handler                 // GET /metrics
	queues   atomic.Pointer[http.Handler] // the queue view (ServeQueues), nil without
	routes   []string                     // the patterns served (Routes)
	hosts    []string                     // http.hosts: the names answered besides IP addresses and localhost
	statuses statusCache                  // /api/status answers, shared for a second
	draining atomic.Bool
	ready    atomic.Pointer[string] // "" ready, else the reasons
	waiting  atomic.Pointer[string] // what ready replicas wait for (Replica.Waiting), "" nothing
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewHandler returns the handler of replicas and starts its readiness
// checks. It tells each replica that a handler serves it
// (baton.Replica.SetHTTPServed).
func NewHandler(replicas ...*baton.Replica) *Handler {
	h := &Handler{replicas: replicas, mux: http.NewServeMux(), stop: make(chan struct{}), done: make(chan struct{})}
	for _, r := range replicas {
		r.SetHTTPServed()
	}
	starting := "starting: readiness not checked yet"
	h.ready.Store(&starting)
	h.metrics = metricsHandler(replicas)
	if len(replicas) > 0 {
		// a Cluster only dials lazily; its config is valid (New took it)
		h.cluster, _ = baton.NewCluster(replicas[0].Config())
		h.hosts = replicas[0].Config().HTTP.Hosts
	}
	h.mount()
	go h.checkLoop()
	return h
}

// ServeHTTP implements http.Handler: a request to a name that is not the
// server's is refused (421) unless it probes /healthz or /readyz.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
func (h *Handler) ownName(host string) bool {
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

// ServeQueues serves the queue view v (asynqmonui.New: asynqmon, read-only)
// under /queues/, behind http.token: a script sends it as a bearer token, a
// browser as the password of HTTP Basic. Without it /queues/ answers 404.
// Close closes v if it is an io.Closer. A handler without replicas (no
// config, no token) does not serve v. Call it once, before serving.
func (h *Handler) ServeQueues(v http.Handler) {
	if h.cluster == nil {
		if c, ok := v.(io.Closer); ok {
			_ = c.Close()
		}
		return
	}
	if h.queues.CompareAndSwap(nil, &v) {
		h.routes = append(h.routes, "/queues/")
	}
}

// Routes lists the patterns h serves, in the order they were mounted (as
// "GET /healthz"; a pattern without a method serves every method).
func (h *Handler) Routes() []string { return append([]string(nil), h.routes...) }

// Drain makes /readyz answer 503 "shutting down" from now on: call it when
// the replicas start to stop, so load balancers look elsewhere.
func (h *Handler) Drain() { h.draining.Store(true) }

// Close stops the readiness checks, and closes the queue view.
func (h *Handler) Close() {
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
func (h *Handler) checkLoop() {
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
