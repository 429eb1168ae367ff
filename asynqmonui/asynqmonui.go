// Package asynqmonui serves asynqmon, the queue side of a deployment
// (queues, tasks, retries, archived), read-only, for batonhttp.Handler's
// /queues/.
//
// It is a package of its own so that a Go program embedding baton links
// asynqmon and its dependencies only when it asks for the view:
//
//	h := batonhttp.NewHandler(replica)
//	q, err := asynqmonui.New(cfg)
//	if err != nil { ... }
//	h.ServeQueues(q) // behind http.token; h.Close closes q
package asynqmonui

import (
	"fmt"
	"net/http"

	"github.com/hibiken/asynqmon"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/wiring"
)

// RootPath is where the view is served: batonhttp.Handler mounts it there.
const RootPath = "/queues"

// Handler is asynqmon's read-only view of a config's queue Redis.
type Handler struct {
	h *asynqmon.HTTPHandler
}

// New returns the view of cfg's queue Redis, served under RootPath. It
// dials lazily. The view is read-only: asynqmon sees every namespace's
// queues on the Redis, and one deployment's token must not change another's
// tasks.
func New(cfg *config.Config) (*Handler, error) {
	c, opt, err := wiring.QueueRedis(cfg)
	if err != nil {
		return nil, fmt.Errorf("asynqmonui: %w", err)
	}
	_ = c.Close() // only the connection option is wanted: asynqmon dials its own
	return &Handler{h: asynqmon.New(asynqmon.Options{RootPath: RootPath, RedisConnOpt: opt, ReadOnly: true})}, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Close closes the view's Redis connections.
func (h *Handler) Close() error { return h.h.Close() }
