package jobs

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
)

// registryNameRE is what a handler name looks like (as HandlerSpec.Name).
var registryNameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)

// Registry maps handler names (the handler: key of a job) to Go handlers.
// Build one, register handlers at start-up and hand it to baton.New with
// baton.WithHandlers. It is safe for concurrent use. The zero value is not usable;
// use NewRegistry.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: make(map[string]Handler)}
}

// Register adds h under name. It returns an error if name does not match
// [a-z0-9._-]{1,64}, if h is nil, or if name is already registered.
func (r *Registry) Register(name string, h Handler) error {
	if !registryNameRE.MatchString(name) {
		return fmt.Errorf("jobs: handler name %q: must match [a-z0-9._-]{1,64}", name)
	}
	if h == nil {
		return fmt.Errorf("jobs: handler %q: nil handler", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[name]; dup {
		return fmt.Errorf("jobs: handler %q registered twice", name)
	}
	r.handlers[name] = h
	return nil
}

// HandleFunc registers f under name, as Register does.
func (r *Registry) HandleFunc(name string, f func(ctx context.Context, run Run) error) error {
	if f == nil {
		return fmt.Errorf("jobs: handler %q: nil handler", name)
	}
	return r.Register(name, HandlerFunc(f))
}

// Lookup returns the handler registered under name.
func (r *Registry) Lookup(name string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[name]
	return h, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.handlers))
}
