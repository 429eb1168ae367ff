package batonhttp

import (
	_ "embed"
	"net/http"
)

// The dashboard page, and the queue view beside it.

//go:embed dashboard.html
var dashboardHTML []byte

// dashboard answers GET /: the page, which reads the API from the browser.
func (h *Handler) dashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline' 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(dashboardHTML)
}

// queueView serves /queues/: the view ServeQueues gave, behind the token
// (h.tokenOnly), or 404 without one.
func (h *Handler) queueView(w http.ResponseWriter, r *http.Request) {
	q := h.queues.Load()
	if q == nil {
		writeError(w, http.StatusNotFound, "no queue view here: a Go program serves it with Handler.ServeQueues (package asynqmonui)")
		return
	}
	h.tokenOnly(*q).ServeHTTP(w, r)
}
