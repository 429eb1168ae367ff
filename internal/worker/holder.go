package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the execution lease's holder record.
//
// Redis names (NS is Config.Namespace; the lock client adds its own prefix to
// lock names):
//
//	lock "exec:<job>"            the job's execution lease (all policies but
//	                             allow):
//	                             auto-extended, fenced; the lock client stores
//	                             it at <lock prefix>{exec:<job>}
//	NS:{exec:<job>}:holder       side record of the lease's holder, JSON
//	                             {id, tick, run_id, attempt, replica}, on the
//	                             queue Redis; PX = the job's lock_ttl, refreshed
//	                             every lock_ttl/3 while the lease lives
//
// The side record is advice, never safety: the lease alone keeps runs apart
// (G2). The record only decides whether a run that finds the lease busy
// waits (the holder is an earlier attempt of the same tick) or skips. It is
// written just after the lease is taken and left to expire after release, so
// for a moment it can name the previous holder; the worst outcome is that a
// retry waits for a run it could have skipped, or skips a tick whose earlier
// attempt is still running it.

// holderRecord is the value of the side record NS:{exec:<job>}:holder.
type holderRecord struct {
	V       int    `json:"v"`    // format version, formats.HolderRecord (absent: 1)
	ID      string `json:"id"`   // tick ID, job@RFC3339
	Tick    string `json:"tick"` // RFC 3339, UTC
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
}

// held records the new holder and keeps the record alive with the lease;
// the run holds the lease and its fence.
func (e *engine) held(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, lease *locking.Lease, log *slog.Logger) *grant {
	rec, _ := json.Marshal(holderRecord{V: formats.HolderRecord, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano), RunID: t.RunID, Attempt: attempt, Replica: e.replica})
	key := holderKey(e.cfg.Namespace, job.Name)
	set := func(ctx context.Context) {
		if err := e.rdb.Set(ctx, key, rec, job.LockTTL).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot write the holder record", slog.Any("error", err))
		}
	}
	set(ctx)
	e.wg.Go(func() {
		clock.Every(lease.Done(), e.clock, job.LockTTL/3, func() { set(lease.Context()) })
	})
	return &grant{lease: lease, fence: lease.Fence()}
}

// readHolder reads the job's holder record; ok is false if there is none or
// it cannot be read.
func (e *engine) readHolder(ctx context.Context, job string, log *slog.Logger) (h holderRecord, ok bool) {
	v, err := e.rdb.Get(ctx, holderKey(e.cfg.Namespace, job)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			log.Warn("cannot read the holder record", slog.Any("error", err))
		}
		return h, false
	}
	if err := json.Unmarshal(v, &h); err != nil {
		log.Warn("bad holder record", slog.Any("error", err))
		return h, false
	}
	return h, true
}

// after reports whether the holder's tick is after at.
func (h holderRecord) after(at time.Time) bool {
	ht, err := time.Parse(time.RFC3339, h.Tick)
	return err == nil && ht.After(at)
}

// String formats the record for logs: "job@tick run=<id> attempt=<n> on <replica>",
// or "unknown".
func (h holderRecord) String() string {
	if h.ID == "" {
		return "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s run=%s attempt=%d", h.ID, h.RunID, h.Attempt)
	if h.Replica != "" {
		b.WriteString(" on " + h.Replica)
	}
	return b.String()
}
