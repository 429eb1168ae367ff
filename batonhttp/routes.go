package batonhttp

import (
	"fmt"
	"net/http"
	"strings"
)

// route is one line of the route table: a pattern of http.ServeMux and
// what answers it, wrapped in who may call it.
type route struct {
	pattern string
	serve   http.Handler
}

// table is every route a Handler serves, in the order Routes lists them.
// Who may call each is its wrapper: open (anyone), h.read (http.token when
// set, unless http.public_reads), h.change (http.token, from this origin),
// h.tokenOnly (http.token, also as HTTP Basic for a browser); see auth.go.
// The methods are in the file of their resource: status.go, runs.go,
// controls.go, schedules.go, calendars.go, metrics.go, dashboard.go.
func (h *Handler) table() []route {
	return []route{
		{"GET /healthz", open(h.healthz)},
		{"GET /readyz", open(h.readyz)},
		{"GET /metrics", open(h.metrics.ServeHTTP)},
		{"GET /{$}", open(h.dashboard)},

		{"GET /api/status", h.read(h.status)}, // Cluster.Status, with this process's held ticks, unsigned and max_clock_skew
		{"GET /api/locks", h.read(h.locks)},   // Cluster.Locks

		{"GET /api/jobs/{job}/history", h.read(h.history)}, // Cluster.History (?n=N, default 20)
		{"GET /api/jobs/{job}/ticks", h.read(h.jobTicks)},  // Cluster.Ticks (?from=T&to=T, RFC 3339; default: the last 100 ticks of 24h)
		{"GET /api/ticks", h.read(h.ticks)},                // Cluster.TicksAll (the same window)

		{"POST /api/jobs/{job}/pause", h.change(h.pause)},       // Cluster.Pause (body {"note": "...", "by": "...", "for": "2h" | "until": TIME} optional)
		{"POST /api/jobs/{job}/resume", h.change(h.resume)},     // Cluster.Resume (body {"catch_up": bool} optional)
		{"POST /api/jobs/{job}/skip", h.change(h.skip)},         // Cluster.Skip (body {"next": N} or {"ticks": [TIME...]}, "note", "by"; default the next tick)
		{"POST /api/jobs/{job}/trigger", h.change(h.trigger)},   // Cluster.Trigger (body {"by": "..."} optional)
		{"POST /api/jobs/{job}/backfill", h.change(h.backfill)}, // Cluster.Backfill (body {"from": T, "to": T, "dry_run": bool})

		{"GET /api/schedules", h.read(h.listSchedules)},               // Cluster.ListSchedules (?prefix=P&after=ID&limit=N&next=N&runs=true)
		{"GET /api/schedules/{id...}", h.read(h.getSchedule)},         // Cluster.GetSchedule (?next=N), its version as the ETag
		{"PUT /api/schedules/{id...}", h.change(h.putSchedule)},       // Cluster.PutScheduleDocument (If-Match, ?force=true)
		{"DELETE /api/schedules/{id...}", h.change(h.deleteSchedule)}, // Cluster.DeleteSchedule (If-Match, ?stop=true)

		{"GET /api/calendars", h.read(h.listCalendars)},              // Cluster.ListCalendars (?after=NAME&limit=N)
		{"GET /api/calendars/{name}", h.read(h.getCalendar)},         // Cluster.GetCalendar
		{"PUT /api/calendars/{name}", h.change(h.putCalendar)},       // Cluster.PutCalendarDocument
		{"DELETE /api/calendars/{name}", h.change(h.deleteCalendar)}, // Cluster.DeleteCalendar (409 while schedules name it)
	}
}

// unlisted are routes served but not listed by Routes: the queue view
// (listed once ServeQueues gave one), the way to it, and the answer to a
// path under /api/ that no route takes.
func (h *Handler) unlisted() []route {
	return []route{
		{"/queues/", open(h.queueView)}, // ServeQueues's view (asynqmon, read-only) behind h.tokenOnly; 404 without one
		{"GET /queues", http.RedirectHandler("/queues/", http.StatusMovedPermanently)},
		{"/api/", open(h.noEndpoint)}, // 404, or 405 naming the methods the path takes
	}
}

// mount adds the routes to h's mux.
func (h *Handler) mount() {
	for _, rt := range h.table() {
		h.routes = append(h.routes, rt.pattern)
		h.mux.Handle(rt.pattern, rt.serve)
	}
	for _, rt := range h.unlisted() {
		h.mux.Handle(rt.pattern, rt.serve)
	}
}

// noEndpoint answers a path under /api/ that no route takes: 405 naming
// the methods it takes, or 404.
func (h *Handler) noEndpoint(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "/api/" && pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path))
}

// open serves f to anyone.
func open(f http.HandlerFunc) http.Handler { return f }
