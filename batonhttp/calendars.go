package batonhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/batonhq/baton/config"
)

// The API of the runtime calendars (the days runtime schedules name in
// exclude and only):
//
//	GET    /api/calendars            Cluster.ListCalendars (?after=NAME
//	                                 &limit=N): a CalendarPage
//	GET    /api/calendars/{name}     Cluster.GetCalendar: a Calendar
//	PUT    /api/calendars/{name}     Cluster.PutCalendarDocument: the body
//	                                 is the definition, JSON or YAML
//	                                 ({"dates": [...], "ranges": [...],
//	                                 "weekdays": [...]}); answers the
//	                                 Calendar put
//	DELETE /api/calendars/{name}     Cluster.DeleteCalendar: {"deleted":
//	                                 name}; 409 while schedules name it
//
// Behind http.token as the schedules' routes. A definition refused
// answers 400 with every problem in "errors".

// listCalendars answers GET /api/calendars: Cluster.ListCalendars.
func (h *Handler) listCalendars(ctx context.Context, r *http.Request) (any, error) {
	limit, err := queryInt(r, "limit", 0, 1000)
	if err != nil {
		return nil, err
	}
	return h.cluster.ListCalendars(ctx, r.URL.Query().Get("after"), limit)
}

// getCalendar answers GET /api/calendars/{name}: Cluster.GetCalendar.
func (h *Handler) getCalendar(ctx context.Context, r *http.Request) (any, error) {
	name, err := calendarNameOf(r)
	if err != nil {
		return nil, err
	}
	return h.cluster.GetCalendar(ctx, name)
}

// putCalendar answers PUT /api/calendars/{name}: the body is the
// definition, put with Cluster.PutCalendarDocument.
func (h *Handler) putCalendar(ctx context.Context, r *http.Request) (any, error) {
	name, err := calendarNameOf(r)
	if err != nil {
		return nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(r.Body, config.MaxCalendarDocument+1))
	switch {
	case err != nil:
		return nil, badRequest("reading the body: %v", err)
	case len(doc) > config.MaxCalendarDocument:
		return nil, &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the definition is over %d bytes", config.MaxCalendarDocument)}
	case strings.TrimSpace(string(doc)) == "":
		return nil, badRequest(`the body is the definition, JSON or YAML: {"dates": ["2026-12-25"], "ranges": ["2026-12-31..2027-01-01"], "weekdays": ["sat", "sun"]}`)
	}
	return h.cluster.PutCalendarDocument(ctx, name, doc)
}

// deleteCalendar answers DELETE /api/calendars/{name}:
// Cluster.DeleteCalendar.
func (h *Handler) deleteCalendar(ctx context.Context, r *http.Request) (any, error) {
	name, err := calendarNameOf(r)
	if err != nil {
		return nil, err
	}
	if err := h.cluster.DeleteCalendar(ctx, name); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": name}, nil
}

// calendarNameOf is the calendar name r's path names, or a 400 saying why
// it cannot be one.
func calendarNameOf(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := config.CheckCalendarName(name); err != nil {
		return "", badRequest("%s", err.Error())
	}
	return name, nil
}
