package batonhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

// The API of the runtime schedules:
//
//	GET    /api/schedules            Cluster.ListSchedules (?prefix=P&after=ID
//	                                 &limit=N&next=N&runs=true): a SchedulePage
//	GET    /api/schedules/{id...}    Cluster.GetSchedule (?next=N): a Schedule,
//	                                 its version as the ETag
//	PUT    /api/schedules/{id...}    Cluster.PutScheduleDocument: the body is
//	                                 the definition, JSON or YAML; with
//	                                 "If-Match: N" only while the schedule
//	                                 is at version N (0: does not exist yet),
//	                                 with its ETag only over it, else 412. One no live replica can run
//	                                 answers 422 (ErrNoRunner), unless
//	                                 ?force=true (AheadOfDeploy). Answers
//	                                 the Schedule put, with its ETag; the
//	                                 same definition again changes nothing.
//	DELETE /api/schedules/{id...}    Cluster.DeleteSchedule (If-Match as a
//	                                 PUT's, else 412; ?stop=true stops
//	                                 the runs under way): {"deleted": id}
//
// The reads are behind http.token as the other reads, the changes as the
// other changes. A definition refused answers 400 with every problem in
// "errors": [{"field", "line", "msg"}], the line in the body sent. Pause,
// resume, trigger, history and ticks of a runtime schedule are the job
// routes', with the job name "@" + id as one path segment: its '/'
// escaped (/api/jobs/%40report%2Ftenant-42/pause).

// listSchedules answers GET /api/schedules: Cluster.ListSchedules
// (?prefix=P&after=ID&limit=N&next=N&runs=true), a SchedulePage with the
// definitions' secrets masked.
func (h *Handler) listSchedules(ctx context.Context, r *http.Request) (any, error) {
	q := baton.ScheduleQuery{Prefix: r.URL.Query().Get("prefix"), After: r.URL.Query().Get("after")}
	var err error
	if q.Limit, err = queryInt(r, "limit", 0, 1000); err != nil {
		return nil, err
	}
	if q.Next, err = queryInt(r, "next", 0, 10); err != nil {
		return nil, err
	}
	if v := r.URL.Query().Get("runs"); v != "" {
		if q.Runs, err = strconv.ParseBool(v); err != nil {
			return nil, badRequest("runs must be true or false, got %q", v)
		}
	}
	page, err := h.cluster.ListSchedules(ctx, q)
	if page.Schedules == nil {
		page.Schedules = []baton.Schedule{}
	}
	for i := range page.Schedules {
		page.Schedules[i] = page.Schedules[i].Masked()
	}
	return page, err
}

// getSchedule answers GET /api/schedules/{id...}: Cluster.GetSchedule
// (?next=N), masked, its version as the ETag.
func (h *Handler) getSchedule(ctx context.Context, r *http.Request) (any, error) {
	id, err := scheduleIDOf(r)
	if err != nil {
		return nil, err
	}
	next, err := queryInt(r, "next", 0, 10)
	if err != nil {
		return nil, err
	}
	s, err := h.cluster.GetSchedule(ctx, id, next)
	return s.Masked(), err
}

// putSchedule answers PUT /api/schedules/{id...}: the body is the
// definition, put with Cluster.PutScheduleDocument, or PutScheduleIfMatch
// with If-Match; ?force=true puts it ahead of a deploy.
func (h *Handler) putSchedule(ctx context.Context, r *http.Request) (any, error) {
	id, err := scheduleIDOf(r)
	if err != nil {
		return nil, err
	}
	ifMatch, err := ifMatchOf(r)
	if err != nil {
		return nil, err
	}
	var opts []baton.PutOption
	if s := r.URL.Query().Get("force"); s != "" {
		force, err := strconv.ParseBool(s)
		if err != nil {
			return nil, badRequest("force must be true or false, got %q", s)
		}
		if force {
			opts = append(opts, baton.AheadOfDeploy())
		}
	}
	limit := int64(h.cluster.Config().Schedules.MaxPayload + config.MaxScheduleDocument)
	doc, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		return nil, badRequest("reading the body: %v", err)
	case int64(len(doc)) > limit:
		return nil, &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the definition is over %d bytes (schedules.max_payload + %d)", limit, config.MaxScheduleDocument)}
	case strings.TrimSpace(string(doc)) == "":
		return nil, badRequest(`the body is the definition, JSON or YAML: {"schedule": "0 9 * * 1", "timezone": "Europe/Berlin", "handler": {"name": "report", "payload": {"tenant": 42}}}`)
	}
	var s baton.Schedule
	if ifMatch == "" {
		s, err = h.cluster.PutScheduleDocument(ctx, id, doc, opts...)
	} else {
		s, err = h.cluster.PutScheduleIfMatch(ctx, id, doc, ifMatch, opts...)
	}
	return s.Masked(), err
}

// deleteSchedule answers DELETE /api/schedules/{id...}:
// Cluster.DeleteSchedule, or DeleteScheduleIfMatch with If-Match;
// ?stop=true stops the runs under way.
func (h *Handler) deleteSchedule(ctx context.Context, r *http.Request) (any, error) {
	id, err := scheduleIDOf(r)
	if err != nil {
		return nil, err
	}
	stop := false
	if s := r.URL.Query().Get("stop"); s != "" {
		if stop, err = strconv.ParseBool(s); err != nil {
			return nil, badRequest("stop must be true or false, got %q", s)
		}
	}
	ifMatch, err := ifMatchOf(r)
	if err != nil {
		return nil, err
	}
	if ifMatch == "" {
		err = h.cluster.DeleteSchedule(ctx, id, stop)
	} else {
		err = h.cluster.DeleteScheduleIfMatch(ctx, id, ifMatch, stop)
	}
	if err != nil {
		return nil, err
	}
	return map[string]string{"deleted": id}, nil
}

// ifMatchOf is r's If-Match ("" without one), or a 400 saying why it
// cannot condition a change of one schedule. A field sent empty (a
// client's ETag that was empty) is refused, not read as none: the change
// it conditions would take whatever is there.
func ifMatchOf(r *http.Request) (string, error) {
	fields := r.Header.Values("If-Match")
	ifMatch := strings.Join(fields, ", ") // a list of tags, as a comma in one field is (RFC 9110 5.3)
	if len(fields) > 0 {
		if err := baton.CheckETag(ifMatch); err != nil {
			return "", badRequest("If-Match must be a schedule's ETag (\"VERSION-CREATED\", as GET answers it) or its version (a whole number; 0: the schedule must not exist yet), got %q", ifMatch)
		}
	}
	return ifMatch, nil
}

// scheduleIDOf is the runtime schedule id r's path names, or a 400 saying
// why it cannot be one.
func scheduleIDOf(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := config.CheckScheduleID(id); err != nil {
		return "", badRequest("%s", err.Error())
	}
	return id, nil
}

// queryInt reads the whole number name of r's query, from lo to hi; 0
// when absent.
func queryInt(r *http.Request, name string, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, badRequest("%s must be a whole number from %d to %d, got %q", name, lo, hi, s)
	}
	return v, nil
}

// fieldProblem is one problem of a refused definition, as the API answers
// it.
type fieldProblem struct {
	Field string `json:"field,omitempty"`
	Line  int    `json:"line,omitempty"`
	Msg   string `json:"msg"`
}

// scheduleStatus is the status and the field problems that err, an error
// of a runtime schedule's call, answers; status 0 when err is none of
// theirs.
func scheduleStatus(err error) (int, []fieldProblem) {
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		out := make([]fieldProblem, len(ce.Errors))
		for i, fe := range ce.Errors {
			out[i] = fieldProblem{Field: fe.Field, Line: fe.Line, Msg: fe.Msg}
		}
		return http.StatusBadRequest, out
	case errors.Is(err, baton.ErrNoSchedule), errors.Is(err, baton.ErrNoCalendar):
		return http.StatusNotFound, nil
	case errors.Is(err, baton.ErrCalendarInUse):
		return http.StatusConflict, nil
	case errors.Is(err, baton.ErrScheduleChanged):
		return http.StatusPreconditionFailed, nil
	case errors.Is(err, baton.ErrNoRunner):
		return http.StatusUnprocessableEntity, nil
	case errors.Is(err, baton.ErrBadQuery):
		return http.StatusBadRequest, nil
	case errors.Is(err, baton.ErrSchedulesMoving), errors.Is(err, baton.ErrLayoutMismatch):
		return http.StatusServiceUnavailable, nil
	}
	return 0, nil
}
