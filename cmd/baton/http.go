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

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/asynqmonui"
	"github.com/batonhq/baton/batonhttp"
)

// httpServer serves batonhttp.Handler (/healthz, /readyz, /metrics) for the
// replicas of this process, on its own listener with limits.
type httpServer struct {
	handler atomic.Pointer[batonhttp.Handler] // replaced when a config reload replaces the replica
	srv     *http.Server
	ln      net.Listener
	log     *slog.Logger
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
)

// newHTTPServer listens on addr (so that a taken port fails at start) and
// returns the server; serve starts answering.
func newHTTPServer(addr string, replicas []*baton.Replica, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	h := &httpServer{ln: ln, log: log}
	h.handler.Store(newHandler(replicas, log))
	h.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, httpMaxBodyBytes)
			h.handler.Load().ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
	return h, nil
}

// newHandler is the HTTP handler of replicas with the queue view (asynqmon)
// under /queues/.
func newHandler(replicas []*baton.Replica, log *slog.Logger) *batonhttp.Handler {
	h := batonhttp.NewHandler(replicas...)
	if len(replicas) == 0 {
		return h
	}
	q, err := asynqmonui.New(replicas[0].Config())
	if err != nil {
		log.Warn("http: no queue view under /queues/", "err", err)
		return h
	}
	h.ServeQueues(q)
	return h
}

// Addr is the address the server listens on.
func (h *httpServer) Addr() string { return h.ln.Addr().String() }

// serve answers requests until shutdown; it returns nil after shutdown.
func (h *httpServer) serve() error {
	defer func() { h.handler.Load().Close() }()
	h.log.Info("http listening", "addr", h.Addr(), "dashboard", "http://"+h.Addr()+"/", "routes", strings.Join(h.handler.Load().Routes(), ", "))
	if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// drain makes /readyz answer 503 while the replicas stop.
func (h *httpServer) drain() { h.handler.Load().Drain() }

// replace serves replicas from now on (a config reload); requests in flight
// finish on the old handler, which is closed a little later.
func (h *httpServer) replace(replicas ...*baton.Replica) {
	old := h.handler.Swap(newHandler(replicas, h.log))
	time.AfterFunc(httpWriteTimeout, old.Close)
}

// shutdown stops the server, giving requests in flight a few seconds.
func (h *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
}

// close releases a server that never served (another part failed to start).
func (h *httpServer) close() {
	h.handler.Load().Close()
	_ = h.ln.Close()
}
