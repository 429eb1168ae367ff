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
	// Slot is the slot of the job's limit the run holds (config limit:),
	// the zero Slot when the job names none.
	Slot Slot
}

// Slot is a slot of a limit shared by jobs, as a run holds it: the limit's
// name, the slot's number (0 to the limit's size - 1) and the fencing token
// of its lease, which a resource the limit guards can check as it checks
// the execution lease's.
type Slot struct {
	Limit string
	Index int
	Fence int64
}

// Env returns the run's identity as the environment contract of exec jobs:
// BATON_JOB, BATON_TICK (RFC 3339, UTC), BATON_RUN_ID, BATON_ATTEMPT,
// BATON_FENCING_TOKEN, BATON_REPLICA; and for a run holding a limit's slot
// BATON_LIMIT, BATON_LIMIT_SLOT and BATON_LIMIT_FENCING_TOKEN.
func (r Run) Env() []string {
	env := []string{
		"BATON_JOB=" + r.Job,
		"BATON_TICK=" + r.Tick.UTC().Format(time.RFC3339),
		"BATON_RUN_ID=" + r.RunID,
		"BATON_ATTEMPT=" + strconv.Itoa(r.Attempt),
		"BATON_FENCING_TOKEN=" + strconv.FormatInt(r.Fence, 10),
		"BATON_REPLICA=" + r.Replica,
	}
	if r.Slot.Limit != "" {
		env = append(env,
			"BATON_LIMIT="+r.Slot.Limit,
			"BATON_LIMIT_SLOT="+strconv.Itoa(r.Slot.Index),
			"BATON_LIMIT_FENCING_TOKEN="+strconv.FormatInt(r.Slot.Fence, 10))
	}
	return env
}

// Headers returns the run's identity as the header contract of http jobs:
// X-Baton-Job, X-Baton-Tick, X-Baton-Run-Id, X-Baton-Attempt,
// X-Baton-Fencing-Token, X-Baton-Replica; and for a run holding a limit's
// slot X-Baton-Limit, X-Baton-Limit-Slot and X-Baton-Limit-Fencing-Token.
func (r Run) Headers() map[string]string {
	h := map[string]string{
		"X-Baton-Job":           r.Job,
		"X-Baton-Tick":          r.Tick.UTC().Format(time.RFC3339),
		"X-Baton-Run-Id":        r.RunID,
		"X-Baton-Attempt":       strconv.Itoa(r.Attempt),
		"X-Baton-Fencing-Token": strconv.FormatInt(r.Fence, 10),
		"X-Baton-Replica":       r.Replica,
	}
	if r.Slot.Limit != "" {
		h["X-Baton-Limit"] = r.Slot.Limit
		h["X-Baton-Limit-Slot"] = strconv.Itoa(r.Slot.Index)
		h["X-Baton-Limit-Fencing-Token"] = strconv.FormatInt(r.Slot.Fence, 10)
	}
	return h
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
