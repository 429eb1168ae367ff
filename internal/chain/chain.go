// Package chain keeps what a job run after others (config after:) needs to
// know of its parents: the outcome of each parent's tick, written where a
// tick's fate is decided for good (the worker at a task's end, the
// scheduler for a tick it did not dispatch) and read by the child's
// worker before it runs the same tick.
//
// Redis names (NS is the namespace), on the queue Redis:
//
//	NS:{JOB}:outcome:<tick ms>  string "ok", or "<status> <reason>": how
//	                            job's tick ended for good; PX =
//	                            Config.OutcomeTTL(JOB), written only for a
//	                            job that others run after
package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/jobs"
)

// Outcome is how a parent's tick ended for good.
type Outcome struct {
	Status jobs.Status
	Reason string
}

// OK reports whether the tick succeeded.
func (o Outcome) OK() bool { return o.Status == jobs.StatusOK }

// encode is o as its record holds it.
func (o Outcome) encode() string {
	if o.OK() {
		return string(jobs.StatusOK)
	}
	return string(o.Status) + " " + o.Reason
}

// decode reads a record; a value that is not one (written by hand) is
// read as a failure saying so.
func decode(v string) Outcome {
	st, reason, _ := strings.Cut(v, " ")
	if st == "" || strings.ContainsAny(st, ":\n") {
		return Outcome{Status: jobs.StatusFailed, Reason: fmt.Sprintf("an outcome record that is none: %q", v)}
	}
	return Outcome{Status: jobs.Status(st), Reason: reason}
}

// maxReason bounds the reason kept in a record.
const maxReason = 500

// Write queues on p the outcome record of job's tick at, when jobs of cfg
// run after job, and returns its command (nil when none is queued).
func Write(ctx context.Context, p redis.Pipeliner, cfg *config.Config, job string, at time.Time, o Outcome) *redis.StatusCmd {
	ttl := cfg.OutcomeTTL(job)
	if ttl <= 0 {
		return nil
	}
	if len(o.Reason) > maxReason {
		o.Reason = o.Reason[:maxReason]
	}
	return p.Set(ctx, Key(cfg.Namespace, job, at), o.encode(), ttl)
}

// Record writes the outcome record of job's tick at alone (see Write).
func Record(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, job string, at time.Time, o Outcome) error {
	if cfg.OutcomeTTL(job) <= 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	Write(ctx, pipe, cfg, job, at, o)
	_, err := pipe.Exec(ctx)
	if err != nil {
		return fmt.Errorf("chain: the outcome of %s@%s: %w", job, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// Read reads the outcome records of the ticks at of parents, in one round
// trip: by parent, the ones that have one (a parent missing from the map
// has not ended its tick, or its record is gone).
func Read(ctx context.Context, rdb redis.UniversalClient, ns string, parents []string, at time.Time) (map[string]Outcome, error) {
	out := make(map[string]Outcome, len(parents))
	if len(parents) == 0 {
		return out, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(parents))
	for i, p := range parents {
		cmds[i] = pipe.Get(ctx, Key(ns, p, at))
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, p := range parents {
		v, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return out, fmt.Errorf("chain: read the outcome of %s@%s: %w", p, at.UTC().Format(time.RFC3339), err)
		default:
			out[p] = decode(v)
		}
	}
	return out, nil
}
