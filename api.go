package baton

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

// The JSON API and the dashboard, served by HTTPHandler on the cluster of
// its replicas' config:
//
//	GET  /                          the dashboard (HTML)
//	GET  /api/status                Cluster.Status, with this process's held
//	                                ticks, unsigned and max_clock_skew
//	GET  /api/locks                 Cluster.Locks
//	GET  /api/jobs/{job}/history    Cluster.History (?n=N, default 20)
//	GET  /api/jobs/{job}/ticks      Cluster.Ticks (?from=T&to=T, RFC 3339;
//	                                default: the last 100 ticks of 24h)
//	GET  /api/ticks                 Cluster.TicksAll (the same window)
//	                                (the reads: bearer token when
//	                                http.token is set, unless
//	                                http.public_reads)
//	POST /api/jobs/{job}/pause      Cluster.Pause (bearer token; body
//	                                {"note": "...", "by": "..."} optional)
//	POST /api/jobs/{job}/resume     Cluster.Resume (bearer token; body
//	                                {"catch_up": bool} optional)
//	POST /api/jobs/{job}/trigger    Cluster.Trigger (bearer token; body
//	                                {"by": "..."} optional)
//	POST /api/jobs/{job}/backfill   Cluster.Backfill (bearer token; body
//	                                {"from": T, "to": T, "dry_run": bool})
//	/queues/                        asynqmon, the queue side: queues, tasks,
//	                                retries, archived (bearer token, or HTTP
//	                                Basic with the token as password, for a
//	                                browser)
//
// Errors are JSON, {"error": "..."}, with a status that says whose fault:
// 400 a bad request, 401 a missing or wrong token, 403 no token
// configured, 404 an unknown job or runtime schedule, 409 a job that
// cannot do that, 412 a schedule changed since the If-Match given, 413 a
// body over maxAPIBody, 503 Redis unreachable. The runtime schedules'
// routes are in schedules_api.go.

// maxAPIBody bounds a request body of the API.
const maxAPIBody = 64 << 10

// apiTimeout bounds the Redis work of one API request.
const apiTimeout = 10 * time.Second

//go:embed dashboard.html
var dashboardHTML []byte

// mountAPI adds the API and the dashboard to h's mux.
func (h *HTTPHandler) mountAPI() {
	h.handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline' 'self'")
		w.Header().Set("X-Frame-Options", "DENY")
		_, _ = w.Write(dashboardHTML)
	}))
	h.handle("GET /api/status", h.read(func(ctx context.Context, r *http.Request) (any, error) {
		st, err := h.status.get(ctx, func(ctx context.Context) (*Status, error) {
			st, err := h.cluster.Status(ctx)
			if st != nil && err != nil {
				// a read may need no token: the reason names no address (as /readyz)
				st.Warnings = append(st.Warnings, "partial: "+addressRE.ReplaceAllString(h.cluster.cfg.MaskSecrets(err.Error()), ""))
				err = nil
			}
			if st != nil {
				// a read may need no token: masters named by their index in
				// locking.masters, without address or error text
				for i := range st.Masters {
					m := &st.Masters[i]
					m.Addr = ""
					if m.Err != "" {
						m.Err = "did not answer"
					}
				}
			}
			return st, err
		})
		if st == nil {
			return nil, err
		}
		return h.statusAnswer(st), err
	}))
	h.handle("GET /api/locks", h.read(func(ctx context.Context, r *http.Request) (any, error) {
		held, err := h.cluster.Locks(ctx)
		if held == nil {
			held = []locking.HeldLock{}
		}
		if err != nil && !errors.Is(err, locking.ErrUnavailable) {
			err = nil // some masters answered: listed
		}
		return held, err
	}))
	h.handle("GET /api/jobs/{job}/history", h.read(func(ctx context.Context, r *http.Request) (any, error) {
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
	}))
	h.handle("GET /api/jobs/{job}/ticks", h.read(func(ctx context.Context, r *http.Request) (any, error) {
		from, to, err := ledgerWindow(r)
		if err != nil {
			return nil, err
		}
		return h.cluster.Ticks(ctx, r.PathValue("job"), from, to)
	}))
	h.handle("GET /api/ticks", h.read(func(ctx context.Context, r *http.Request) (any, error) {
		from, to, err := ledgerWindow(r)
		if err != nil {
			return nil, err
		}
		ls, err := h.cluster.TicksAll(ctx, from, to)
		if ls == nil {
			ls = []*TickLedger{}
		}
		return ls, err
	}))
	h.handle("POST /api/jobs/{job}/pause", h.mutating(func(ctx context.Context, r *http.Request) (any, error) {
		var body struct {
			Note string `json:"note"`
			By   string `json:"by"`
		}
		if _, err := readBody(r, &body); err != nil {
			return nil, err
		}
		// the token names no caller: a name given is the caller's word
		by := "api"
		if body.By != "" {
			by = "api:" + body.By
		}
		return h.cluster.Pause(ctx, r.PathValue("job"), PauseNote{By: by, Note: body.Note})
	}))
	h.handle("POST /api/jobs/{job}/resume", h.mutating(func(ctx context.Context, r *http.Request) (any, error) {
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
	}))
	h.handle("POST /api/jobs/{job}/trigger", h.mutating(func(ctx context.Context, r *http.Request) (any, error) {
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
	}))
	h.handle("POST /api/jobs/{job}/backfill", h.mutating(func(ctx context.Context, r *http.Request) (any, error) {
		var body struct {
			From   time.Time `json:"from"`
			To     time.Time `json:"to"`
			DryRun bool      `json:"dry_run"`
		}
		if _, err := readBody(r, &body); err != nil {
			return nil, err
		}
		if body.From.IsZero() || body.To.IsZero() {
			return nil, badRequest(`from and to are required, as RFC 3339 times: {"from": "2026-11-25T02:00:00Z", "to": "2026-11-25T06:00:00Z"}`)
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		return h.cluster.Backfill(bctx, r.PathValue("job"), body.From, body.To, body.DryRun)
	}))
	h.mountSchedules()
	h.mux.Handle("/queues/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := h.queues.Load()
		if q == nil {
			writeError(w, http.StatusNotFound, "no queue view here: a Go program serves it with HTTPHandler.ServeQueues (package asynqmonui)")
			return
		}
		h.tokenOnly(*q).ServeHTTP(w, r)
	}))
	h.mux.Handle("GET /queues", http.RedirectHandler("/queues/", http.StatusMovedPermanently))
	h.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// a path served under other methods is 405, naming them
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
	})
}

// ServeQueues serves the queue view v (asynqmonui.New: asynqmon, read-only)
// under /queues/, behind http.token: a script sends it as a bearer token, a
// browser as the password of HTTP Basic. Without it /queues/ answers 404.
// Close closes v if it is an io.Closer. A handler without replicas (no
// config, no token) does not serve v. Call it once, before serving.
func (h *HTTPHandler) ServeQueues(v http.Handler) {
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
func (h *HTTPHandler) Routes() []string { return append([]string(nil), h.routes...) }

// handle mounts handler on pattern and lists it in Routes.
func (h *HTTPHandler) handle(pattern string, handler http.Handler) {
	h.routes = append(h.routes, pattern)
	h.mux.Handle(pattern, handler)
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

// apiError is an error with the HTTP status it answers.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
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

// api wraps a read call: JSON out, errors mapped to statuses.
func (h *HTTPHandler) api(f func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
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

// read is api behind the bearer token of http.token when one is set,
// unless http.public_reads: output tails of failed runs can hold secrets
// that no ${VAR} masks.
func (h *HTTPHandler) read(f func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
	inner := h.api(func(ctx context.Context, r *http.Request) (any, error) {
		v, err := f(ctx, r)
		return v, hideAddresses(err)
	})
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cluster != nil && h.cluster.cfg.HTTP.Token != "" && !h.cluster.cfg.HTTP.PublicReads && !h.authorized(w, r) {
			return
		}
		inner(w, r)
	}
}

// mutating is api behind the bearer token of http.token.
func (h *HTTPHandler) mutating(f func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
	inner := h.api(f)
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cluster == nil {
			inner(w, r)
			return
		}
		if !h.authorized(w, r) {
			return
		}
		inner(w, r)
		h.status.forget() // the next status shows the change
	}
}

// statusEvery is how long an answer of /api/status serves: dashboards poll
// it every 2 seconds each, and a status scans the lock masters' keys.
const statusEvery = time.Second

// statusCache shares one Cluster.Status among the requests of statusEvery.
type statusCache struct {
	mu sync.Mutex
	at time.Time
	st *Status
}

func (c *statusCache) get(ctx context.Context, read func(context.Context) (*Status, error)) (*Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st != nil && time.Since(c.at) < statusEvery {
		return c.st, nil
	}
	st, err := read(ctx)
	if err == nil {
		c.st, c.at = st, time.Now()
	}
	return st, err
}

func (c *statusCache) forget() {
	c.mu.Lock()
	c.st = nil
	c.mu.Unlock()
}

// authorized checks the request's token against http.token in constant
// time, answering 403 when no token is configured and 401 for a missing or
// wrong one. The token comes as "Authorization: Bearer <token>"; under
// /queues/ also as the password of HTTP Basic (what a browser can send to
// a page). A browser re-sends Basic credentials on its own, also in
// requests another site makes it send, so no other path takes them, and a
// request that changes something must come from this origin (CSRF).
func (h *HTTPHandler) authorized(w http.ResponseWriter, r *http.Request) bool {
	want := h.cluster.cfg.HTTP.Token
	if want == "" {
		writeError(w, http.StatusForbidden, "changes through the API and the queue view are off: set http.token in the config")
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && crossSite(r) {
		writeError(w, http.StatusForbidden, "a request from another site cannot change anything here")
		return false
	}
	queues := strings.HasPrefix(r.URL.Path, "/queues/")
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok && queues {
		_, got, ok = r.BasicAuth()
	}
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		w.Header().Add("WWW-Authenticate", `Bearer realm="baton"`)
		if queues {
			// only here: a Basic challenge makes a browser prompt, also
			// for the dashboard's own reads of /api/
			w.Header().Add("WWW-Authenticate", `Basic realm="baton (any user, http.token as password)"`)
		}
		msg := "a valid token is required: Authorization: Bearer <http.token>"
		if queues {
			msg += ", or HTTP Basic with it as the password"
		}
		writeError(w, http.StatusUnauthorized, msg)
		return false
	}
	return true
}

// crossSite reports whether a browser says the request comes from another
// site: Sec-Fetch-Site other than same-origin or none, or an Origin whose
// host is not the request's.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}

// tokenOnly serves next to requests that carry the token.
func (h *HTTPHandler) tokenOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// fail answers err with its status.
func (h *HTTPHandler) fail(w http.ResponseWriter, err error) {
	var ae *apiError
	status := http.StatusInternalServerError
	scheduleErr, problems := scheduleStatus(err)
	switch {
	case errors.As(err, &ae):
		status = ae.status
	case scheduleErr != 0:
		status = scheduleErr
		if problems != nil {
			for i := range problems {
				problems[i].Msg = h.cluster.cfg.MaskSecrets(problems[i].Msg)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": h.cluster.cfg.MaskSecrets(err.Error()), "errors": problems})
			return
		}
	case errors.Is(err, ErrUnknownJob):
		status = http.StatusNotFound
	case errors.Is(err, ErrNotTriggerable):
		status = http.StatusConflict
	case errors.Is(err, ErrBackfillWindow), errors.Is(err, ErrBadPause), errors.Is(err, ErrTickWindow):
		status = http.StatusBadRequest
	case errors.Is(err, locking.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, h.cluster.cfg.MaskSecrets(err.Error()))
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

// statusAnswer is what GET /api/status answers: the deployment's Status,
// and what only this process knows or its config says, for the
// dashboard's banner.
type statusAnswer struct {
	*Status
	// Held are the ticks this process's schedulers hold back now (lock
	// masters or queue failing), per replica; none when none are held.
	Held []heldTicks `json:"held,omitempty"`
	// Unsigned is true when security.signing_keys is not set: tasks are
	// not signed, and anyone who can write to the queue Redis can make
	// baton run a cron job.
	Unsigned bool `json:"unsigned,omitempty"`
	// MaxClockSkew is the config's max_clock_skew (nanoseconds, as the
	// replicas' skew): a replica off by more does not claim.
	MaxClockSkew time.Duration `json:"max_clock_skew"`
}

// heldTicks is how many ticks one replica holds back.
type heldTicks struct {
	Replica string `json:"replica"`
	Ticks   int    `json:"ticks"`
}

// statusAnswer adds to st what this process knows (a copy: st is shared
// by the requests of statusEvery).
func (h *HTTPHandler) statusAnswer(st *Status) statusAnswer {
	a := statusAnswer{Status: st, MaxClockSkew: h.cluster.cfg.MaxClockSkew, Unsigned: len(h.cluster.cfg.Security.SigningKeys) == 0}
	for _, rp := range h.replicas {
		if n := rp.HeldTicks(); n > 0 {
			a.Held = append(a.Held, heldTicks{Replica: rp.ID(), Ticks: n})
		}
	}
	return a
}
