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
//	                            handoff.OutcomeTTL(JOB), written only for a
//	                            job that others run after
//
// A tick's task may end more than once (a copy put back into the queue
// and refused, a duplicate dispatch skipped, a replica that lets a tick go
// as missed while another dispatched it): the first end of a tick that did
// not succeed is kept (NX), and a success is written over anything, so a
// later refusal or miss never hides that the tick ran and succeeded. A
// backfill forgets a record that says the tick was missed or paused
// (Forget) before it runs the tick again.
package chain

import (
	"context"
	_ "embed" // lua/forget.lua
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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

// Write queues on p the outcome record of job's tick at in namespace ns,
// living ttl (handoff.OutcomeTTL: 0 when no job runs after job), and
// returns its command (nil when none is queued). A success replaces any
// record; another outcome is written only where the tick has none yet
// (its command then answers redis.Nil: the tick's first end stands).
func Write(ctx context.Context, p redis.Pipeliner, ns, job string, at time.Time, ttl time.Duration, o Outcome) *redis.StatusCmd {
	if ttl <= 0 {
		return nil
	}
	if o.OK() {
		return p.Set(ctx, Key(ns, job, at), o.encode(), ttl)
	}
	if len(o.Reason) > maxReason {
		o.Reason = o.Reason[:maxReason]
	}
	return p.SetArgs(ctx, Key(ns, job, at), o.encode(), redis.SetArgs{Mode: "NX", TTL: ttl})
}

// Record writes the outcome record of job's tick at alone (see Write).
func Record(ctx context.Context, rdb redis.UniversalClient, ns, job string, at time.Time, ttl time.Duration, o Outcome) error {
	if ttl <= 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	cmd := Write(ctx, pipe, ns, job, at, ttl, o)
	_, _ = pipe.Exec(ctx) // the command's own error is read below
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
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

var (
	//go:embed lua/forget.lua
	forgetSrc    string
	forgetScript = redis.NewScript(forgetSrc)
)

// Forget deletes the outcome record of job's tick at if it says the tick
// did not run (missed, paused; lua/forget.lua): a backfill runs it again,
// so the jobs after it wait for that run's end. Any other record stays.
func Forget(ctx context.Context, rdb redis.UniversalClient, ns, job string, at time.Time) error {
	if err := forgetScript.Run(ctx, rdb, []string{Key(ns, job, at)}).Err(); err != nil {
		return fmt.Errorf("chain: forget the outcome of %s@%s: %w", job, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// EndOf is how a parent's tick at ended, by its run history's last record
// of it (not a manual run), if that is an end: the outcome its record
// would hold (a failed attempt with retries left, maxRetry being its
// job's, is no end yet). Where the record is gone (a backfill seeds it;
// a child's worker reads it at its deadline).
func EndOf(recs []jobs.RunRecord, maxRetry int, at time.Time) (Outcome, bool) {
	var last *jobs.RunRecord
	for i := range recs {
		r := &recs[i]
		if r.Manual || !r.Tick.Equal(at) {
			continue
		}
		if last == nil || r.Attempt > last.Attempt || (r.Attempt == last.Attempt && r.Started.After(last.Started)) {
			last = r
		}
	}
	if last == nil {
		return Outcome{}, false
	}
	switch last.Status {
	case jobs.StatusOK:
		return Outcome{Status: jobs.StatusOK}, true
	case jobs.StatusRunning, jobs.StatusDispatched, jobs.StatusUnknown, jobs.StatusMissed, jobs.StatusPaused:
		// under way, or never ran (it may be backfilled): no end yet
		return Outcome{}, false
	case jobs.StatusFailed, jobs.StatusTimedOut, jobs.StatusLeaseLost:
		if last.Attempt <= maxRetry {
			return Outcome{}, false // another attempt may come
		}
	}
	return Outcome{Status: last.Status, Reason: last.Reason}, true
}
