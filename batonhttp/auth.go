package batonhttp

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// Who may call a route: the wrappers of the route table (routes.go).

// read serves f behind the bearer token of http.token when one is set,
// unless http.public_reads (output tails of failed runs can hold secrets
// that no ${VAR} masks); the addresses an error names are hidden.
func (h *Handler) read(f apiCall) http.Handler {
	inner := h.api(func(ctx context.Context, r *http.Request) (any, error) {
		v, err := f(ctx, r)
		return v, hideAddresses(err)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cluster != nil {
			if cfg := h.cluster.Config(); cfg.HTTP.Token != "" && !cfg.HTTP.PublicReads && !h.authorized(w, r) {
				return
			}
		}
		inner(w, r)
	})
}

// change serves f, which changes something, behind the bearer token of
// http.token; the next status shows the change.
func (h *Handler) change(f apiCall) http.Handler {
	inner := h.api(f)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cluster == nil {
			inner(w, r)
			return
		}
		if !h.authorized(w, r) {
			return
		}
		inner(w, r)
		h.statuses.forget()
	})
}

// tokenOnly serves next to requests that carry the token.
func (h *Handler) tokenOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// authorized checks the request's token against http.token in constant
// time, answering 403 when no token is configured and 401 for a missing or
// wrong one. The token comes as "Authorization: Bearer <token>"; under
// /queues/ also as the password of HTTP Basic (what a browser can send to
// a page). A browser re-sends Basic credentials on its own, also in
// requests another site makes it send, so no other path takes them, and a
// request that changes something must come from this origin (CSRF).
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	want := h.cluster.Config().HTTP.Token
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
