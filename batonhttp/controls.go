package batonhttp

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/batonhq/baton"
)

// What steers a job: pause, resume, trigger and backfill. Each is a change
// (h.change: the token, from this origin); a runtime schedule is named "@"
// + id, as one path segment.

// pause answers POST /api/jobs/{job}/pause: Cluster.Pause, with who
// ("api", or "api:" + the body's by: the token names no caller), the
// body's note, and an end: "for" (a duration: "2h") or "until" (RFC 3339).
func (h *Handler) pause(ctx context.Context, r *http.Request) (any, error) {
	var body struct {
		Note  string `json:"note"`
		By    string `json:"by"`
		For   string `json:"for"`
		Until string `json:"until"`
	}
	if _, err := readBody(r, &body); err != nil {
		return nil, err
	}
	until, err := pauseEnd(body.For, body.Until, time.Now())
	if err != nil {
		return nil, err
	}
	// the token names no caller: a name given is the caller's word
	by := "api"
	if body.By != "" {
		by = "api:" + body.By
	}
	return h.cluster.Pause(ctx, r.PathValue("job"), baton.PauseNote{By: by, Note: body.Note, Until: until})
}

// pauseEnd reads a pause's end from a request: "for" (a Go duration,
// from now) or "until" (RFC 3339), not both; zero for neither.
func pauseEnd(forText, untilText string, now time.Time) (time.Time, error) {
	switch {
	case forText != "" && untilText != "":
		return time.Time{}, badRequest(`"for" and "until" exclude each other: give one`)
	case forText != "":
		d, err := time.ParseDuration(forText)
		if err != nil || d <= 0 {
			return time.Time{}, badRequest(`"for": want a positive duration such as "2h" or "30m"`)
		}
		return now.Add(d), nil
	case untilText != "":
		t, err := time.Parse(time.RFC3339, untilText)
		if err != nil {
			return time.Time{}, badRequest(`"until": want an RFC 3339 time such as "2026-12-24T18:00:00Z"`)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// resume answers POST /api/jobs/{job}/resume: Cluster.Resume, catching up
// the ticks missed while paused when the body says catch_up.
func (h *Handler) resume(ctx context.Context, r *http.Request) (any, error) {
	var body struct {
		CatchUp bool `json:"catch_up"`
	}
	if _, err := readBody(r, &body); err != nil {
		return nil, err
	}
	if !body.CatchUp {
		return h.cluster.Resume(ctx, r.PathValue("job"), false)
	}
	// a catch-up dispatches through the claim: it may outlast apiTimeout
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return h.cluster.Resume(cctx, r.PathValue("job"), true)
}

// trigger answers POST /api/jobs/{job}/trigger: Cluster.Trigger, by "api"
// or "api:" + the body's by.
func (h *Handler) trigger(ctx context.Context, r *http.Request) (any, error) {
	var body struct {
		By string `json:"by"`
	}
	if _, err := readBody(r, &body); err != nil {
		return nil, err
	}
	by := "api"
	if body.By != "" {
		if len(body.By) > 128 || strings.ContainsAny(body.By, "\r\n") {
			return nil, badRequest("by must be one line of at most 128 bytes")
		}
		by = "api:" + body.By
	}
	t, err := h.cluster.Trigger(ctx, r.PathValue("job"), by)
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": t.Job, "run_id": t.RunID, "tick": t.At, "by": t.Replica}, nil
}

// skip answers POST /api/jobs/{job}/skip: Cluster.Skip of the body's
// next N ticks (default 1) or its ticks, with who ("api", or "api:" + the
// body's by) and the body's note.
func (h *Handler) skip(ctx context.Context, r *http.Request) (any, error) {
	var body struct {
		Next  int         `json:"next"`
		Ticks []time.Time `json:"ticks"`
		Note  string      `json:"note"`
		By    string      `json:"by"`
	}
	if _, err := readBody(r, &body); err != nil {
		return nil, err
	}
	if body.Next == 0 && len(body.Ticks) == 0 {
		body.Next = 1
	}
	by := "api"
	if body.By != "" {
		by = "api:" + body.By
	}
	return h.cluster.Skip(ctx, r.PathValue("job"), baton.SkipRequest{By: by, Note: body.Note, Next: body.Next, Ticks: body.Ticks})
}

// backfill answers POST /api/jobs/{job}/backfill: Cluster.Backfill of the
// body's window, or its plan with dry_run; with chain, Cluster.BackfillChain
// ({"plans": [...]}, and "error" when a link after the first failed to
// dispatch).
func (h *Handler) backfill(ctx context.Context, r *http.Request) (any, error) {
	var body struct {
		From   time.Time `json:"from"`
		To     time.Time `json:"to"`
		DryRun bool      `json:"dry_run"`
		Chain  bool      `json:"chain"`
	}
	if _, err := readBody(r, &body); err != nil {
		return nil, err
	}
	if body.From.IsZero() || body.To.IsZero() {
		return nil, badRequest(`from and to are required, as RFC 3339 times: {"from": "2026-11-25T02:00:00Z", "to": "2026-11-25T06:00:00Z"}`)
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if body.Chain {
		plans, err := h.cluster.BackfillChain(bctx, r.PathValue("job"), body.From, body.To, body.DryRun)
		if err != nil && !baton.AnyDispatched(plans) {
			return nil, err
		}
		// a chain dispatched in part says so beside its plans
		out := struct {
			Plans []baton.BackfillPlan `json:"plans"`
			Error string               `json:"error,omitempty"`
		}{Plans: plans}
		if err != nil {
			out.Error = h.cluster.Config().MaskSecrets(err.Error())
		}
		return out, nil
	}
	return h.cluster.Backfill(bctx, r.PathValue("job"), body.From, body.To, body.DryRun)
}
