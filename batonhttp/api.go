package batonhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/locking"
)

// The JSON API's plumbing: a call answers a value, encoded as JSON, or an
// error, answered as JSON too, {"error": "..."}, with a status that says
// whose fault: 400 a bad request, 401 a missing or wrong token, 403 no
// token configured, 404 an unknown job or runtime schedule, 409 a job that
// cannot do that, 412 a schedule changed since the If-Match given, 413 a
// body over maxAPIBody, 503 Redis unreachable.

// maxAPIBody bounds a request body of the API.
const maxAPIBody = 64 << 10

// apiTimeout bounds the Redis work of one API request.
const apiTimeout = 10 * time.Second

// apiCall is a method of the JSON API: what it answers r, or why not.
type apiCall func(ctx context.Context, r *http.Request) (any, error)

// api serves f: JSON out, errors mapped to statuses.
func (h *Handler) api(f apiCall) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cluster == nil {
			writeError(w, http.StatusServiceUnavailable, "this handler serves no replica: the API needs a config")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		v, err := f(ctx, r)
		if err != nil {
			h.fail(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if t, ok := v.(tagged); ok && t.ETag() != "" {
			w.Header().Set("ETag", t.ETag())
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
}

// tagged is an answer with an entity tag (the ETag header), which a
// conditional change takes back (If-Match).
type tagged interface{ ETag() string }

// apiError is an error with the HTTP status it answers.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// fail answers err with its status.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	var ae *apiError
	status := http.StatusInternalServerError
	cfg := h.cluster.Config()
	scheduleErr, problems := scheduleStatus(err)
	switch {
	case errors.As(err, &ae):
		status = ae.status
	case scheduleErr != 0:
		status = scheduleErr
		if problems != nil {
			for i := range problems {
				problems[i].Msg = cfg.MaskSecrets(problems[i].Msg)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": cfg.MaskSecrets(err.Error()), "errors": problems})
			return
		}
	case errors.Is(err, baton.ErrUnknownJob):
		status = http.StatusNotFound
	case errors.Is(err, baton.ErrNotTriggerable):
		status = http.StatusConflict
	case errors.Is(err, baton.ErrBackfillWindow), errors.Is(err, baton.ErrBadPause), errors.Is(err, baton.ErrTickWindow):
		status = http.StatusBadRequest
	case errors.Is(err, locking.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, cfg.MaskSecrets(err.Error()))
}

// writeError answers {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// a JSON answer, not HTML: "<" and ">" stay as they are
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"error": msg})
}

// readBody decodes a JSON body into v (nil: any body must be empty or a
// JSON object), refusing bodies over maxAPIBody and unknown fields.
func readBody(r *http.Request, v any) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody+1))
	if err != nil {
		return nil, badRequest("reading the body: %v", err)
	}
	if len(data) > maxAPIBody {
		return nil, &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", maxAPIBody)}
	}
	if strings.TrimSpace(string(data)) == "" {
		return data, nil
	}
	if v == nil {
		v = &struct{}{}
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, badRequest("the body is not the JSON this call takes: %v", err)
	}
	return data, nil
}

// addressRE matches the " (host:port)" a master's error names.
var addressRE = regexp.MustCompile(` \([^()\s]+:[0-9]+\)`)

// Addresses an error of a Redis client names: a Redis URL, a dialed or
// read endpoint, an IP address and port.
var (
	redisURLRE = regexp.MustCompile(`rediss?://[^\s"]+`)
	endpointRE = regexp.MustCompile(`\b(tcp|tcp4|tcp6|unix) [^\s]+`)
	ipPortRE   = regexp.MustCompile(`\b[0-9]{1,3}(\.[0-9]{1,3}){3}:[0-9]+\b|\[[0-9a-fA-F:.]+\]:[0-9]+`)
)

// hideAddresses is err, as a read of the API answers it, without the
// addresses of the Redis servers it names: a read may need no token
// (http.public_reads), and where baton's Redis servers listen is not for
// whoever reaches the API (/api/status and /readyz name none either).
// errors.Is still finds what err wraps.
func hideAddresses(err error) error {
	if err == nil {
		return nil
	}
	msg := addressRE.ReplaceAllString(err.Error(), "")
	msg = redisURLRE.ReplaceAllString(msg, "redis://(address hidden)")
	msg = endpointRE.ReplaceAllString(msg, "$1 (address hidden)")
	msg = ipPortRE.ReplaceAllString(msg, "(address hidden)")
	if msg == err.Error() {
		return err
	}
	return &hiddenAddresses{msg: msg, err: err}
}

// hiddenAddresses is an error whose text lost the addresses it named.
type hiddenAddresses struct {
	msg string
	err error
}

func (e *hiddenAddresses) Error() string { return e.msg }
func (e *hiddenAddresses) Unwrap() error { return e.err }
