package jobs

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Run describes one run of a job: everything a handler, an exec child (as
// BATON_* environment variables) or an http endpoint (as X-Baton-* headers)
// learns about it.
type Run struct {
	Job     string    // the job's name
	Tick    time.Time // the instant the tick was due, UTC
	RunID   string    // random id of the dispatch
	Attempt int       // 1 for the first attempt, 2 for the first retry, ...
	Fence   int64     // fencing token from the lock masters: of the execution lease (concurrency: allow, of a momentary lease taken as the run starts)
	Replica string    // the replica running it
	Payload json.RawMessage
}

// Env returns the run's identity as the environment contract of exec jobs:
// BATON_JOB, BATON_TICK (RFC 3339, UTC), BATON_RUN_ID, BATON_ATTEMPT,
// BATON_FENCING_TOKEN, BATON_REPLICA.
func (r Run) Env() []string {
	return []string{
		"BATON_JOB=" + r.Job,
		"BATON_TICK=" + r.Tick.UTC().Format(time.RFC3339),
		"BATON_RUN_ID=" + r.RunID,
		"BATON_ATTEMPT=" + strconv.Itoa(r.Attempt),
		"BATON_FENCING_TOKEN=" + strconv.FormatInt(r.Fence, 10),
		"BATON_REPLICA=" + r.Replica,
	}
}

// Headers returns the run's identity as the header contract of http jobs:
// X-Baton-Job, X-Baton-Tick, X-Baton-Run-Id, X-Baton-Attempt,
// X-Baton-Fencing-Token, X-Baton-Replica.
func (r Run) Headers() map[string]string {
	return map[string]string{
		"X-Baton-Job":           r.Job,
		"X-Baton-Tick":          r.Tick.UTC().Format(time.RFC3339),
		"X-Baton-Run-Id":        r.RunID,
		"X-Baton-Attempt":       strconv.Itoa(r.Attempt),
		"X-Baton-Fencing-Token": strconv.FormatInt(r.Fence, 10),
		"X-Baton-Replica":       r.Replica,
	}
}

// Handler is a Go job registered by name (the handler: key of a job). It runs
// under a context that ends when the run's lease is lost, its timeout passes,
// a replace stops it, or the worker shuts down.
type Handler interface {
	Handle(ctx context.Context, run Run) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run Run) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, run Run) error { return f(ctx, run) }
