package batonhttp

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobs"
)

// A job's runs (its history) and the tick ledger: every tick and what
// became of it.

// history answers GET /api/jobs/{job}/history: the job's newest runs
// (?n=N, default 20).
func (h *Handler) history(ctx context.Context, r *http.Request) (any, error) {
	n := 20
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 10000 {
			return nil, badRequest("n must be a whole number from 0 to 10000, got %q", s)
		}
		n = v
	}
	recs, err := h.cluster.History(ctx, r.PathValue("job"), n)
	if recs == nil {
		recs = []jobs.RunRecord{}
	}
	return recs, err
}

// jobTicks answers GET /api/jobs/{job}/ticks: the job's tick ledger in
// the window of ledgerWindow.
func (h *Handler) jobTicks(ctx context.Context, r *http.Request) (any, error) {
	from, to, err := ledgerWindow(r)
	if err != nil {
		return nil, err
	}
	return h.cluster.Ticks(ctx, r.PathValue("job"), from, to)
}

// ticks answers GET /api/ticks: every job's tick ledger in the window of
// ledgerWindow.
func (h *Handler) ticks(ctx context.Context, r *http.Request) (any, error) {
	from, to, err := ledgerWindow(r)
	if err != nil {
		return nil, err
	}
	ls, err := h.cluster.TicksAll(ctx, from, to)
	if ls == nil {
		ls = []*baton.TickLedger{}
	}
	return ls, err
}

// ledgerWindow reads a ledger's window from r's query: from and to, RFC
// 3339 times, each optional (zero: Cluster.Ticks's default).
func ledgerWindow(r *http.Request) (from, to time.Time, err error) {
	var window [2]time.Time
	for i, name := range []string{"from", "to"} {
		s := r.URL.Query().Get(name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, time.Time{}, badRequest("%s must be an RFC 3339 time (2026-11-25T02:00:00Z), got %q", name, s)
		}
		window[i] = t
	}
	return window[0], window[1], nil
}
