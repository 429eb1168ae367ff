package baton

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/jobs"
)

// The runtime schedules in the status: a summary, not a row each (there
// may be 100,000). It is read in two pipelined round trips to the queue
// Redis from keys kept small on purpose (the definitions and the failing
// index in each shard of schedules.shards: {schedules.K} for shard K when
// there are several):
//
//	NS:{schedules}:defs     the definitions (schedstore): HLEN counts them
//	NS:{schedules}:paused   zset id -> when paused (ms), kept by
//	                        Cluster.Pause and Resume of a runtime schedule
//	NS:{schedules}:paused-until  zset id -> when its pause ends by itself
//	                        (ms): the status drops the ids whose end passed
//	NS:{schedules}:refused  hash replica id -> JSON refusalReport: the
//	                        schedules each replica refuses to run, and why
//	NS:{schedules}:failing  zset id -> when its failures began (ms), kept
//	                        by the workers' history writer (runlog)
//	NS:{schedules}:went-back hash replica id -> JSON StoreWentBack: the
//	                        last time each replica found the store gone
//	                        back, kept a day
//
// and the histories of the first few failing ones, in one more.

// ScheduleProblem is one runtime schedule that needs an eye, and why.
type ScheduleProblem struct {
	ID  string `json:"id"`
	Job string `json:"job"` // "@" + ID
	Why string `json:"why"`
}

// SchedulesStatus summarises the runtime schedules.
type SchedulesStatus struct {
	// Count is how many are stored.
	Count int64 `json:"count"`
	// Paused is how many are paused (Cluster.Pause or PauseSchedule), and
	// PausedFirst the ids of the first few, the longest paused first.
	Paused      int64    `json:"paused"`
	PausedFirst []string `json:"paused_first,omitempty"`
	// Refused is how many a live replica refuses to run (not signed as the
	// signing keys require, not valid for its config), and RefusedFirst
	// the first few, in id order, with why: they are not run until put
	// again.
	Refused      int               `json:"refused"`
	RefusedFirst []ScheduleProblem `json:"refused_first,omitempty"`
	// Failing is how many have a newest run that failed (failed, timed
	// out, lease lost), and FailingFirst the first few, the longest
	// failing first, with how many runs failed in a row and the last
	// reason.
	Failing      int64             `json:"failing"`
	FailingFirst []ScheduleProblem `json:"failing_first,omitempty"`
	// WentBack is the latest time, within a day, that replicas found the
	// store gone back (the queue Redis restarted without persistence, or
	// from an older snapshot), and what they put back; nil when none did.
	WentBack *StoreWentBack `json:"went_back,omitempty"`
}

// StoreWentBack is what a replica found and did when the runtime schedule
// store went back: it put back what it had read (schedstore's restore).
type StoreWentBack struct {
	At      time.Time `json:"at"`
	Replica string    `json:"replica"`
	Shard   int       `json:"shard"`
	// Had is the shard's version the replica had read; Now the store's.
	Had int64 `json:"had"`
	Now int64 `json:"now"`
	// PutBack and Deleted: the schedules it put back and deleted again;
	// Kept: changed since it went back (left as they are); Superseded:
	// restored by another replica first.
	PutBack    int `json:"put_back"`
	Deleted    int `json:"deleted"`
	Kept       int `json:"kept"`
	Superseded int `json:"superseded"`
}

// storeWentBackFor is how long the status reports a store gone back.
const storeWentBackFor = 24 * time.Hour

// schedulesListed is how many ids the status names per kind of problem.
const schedulesListed = 10

// refusalReport is what a replica reports of the runtime schedules it
// refuses.
type refusalReport struct {
	At    int64             `json:"at"` // when written (the replica's clock, ms)
	Count int               `json:"count"`
	First []ScheduleProblem `json:"first,omitempty"` // up to schedulesListed, in id order
}

func schedulesPausedKey(ns string) string { return ns + ":{schedules}:paused" }
func schedulesPausedUntilKey(ns string) string {
	return ns + ":{schedules}:paused-until"
}
func schedulesRefusedKey(ns string) string  { return ns + ":{schedules}:refused" }
func schedulesWentBackKey(ns string) string { return ns + ":{schedules}:went-back" }

// notePauseOf keeps the index of paused runtime schedules that the status
// counts: job (a runtime schedule's) paused since at until until (zero:
// until a resume), or resumed. Best effort: the pause flags on the lock
// masters decide, the index only counts them.
func (c *Cluster) notePauseOf(ctx context.Context, job string, paused bool, at, until time.Time) {
	id, ok := config.ScheduleID(job)
	if !ok {
		return
	}
	key, untilKey := schedulesPausedKey(c.cfg.Namespace), schedulesPausedUntilKey(c.cfg.Namespace)
	_, _ = c.queue.Pipelined(ctx, func(p redis.Pipeliner) error {
		switch {
		case !paused:
			p.ZRem(ctx, key, id)
			p.ZRem(ctx, untilKey, id)
		case until.IsZero():
			p.ZAddNX(ctx, key, redis.Z{Score: float64(at.UnixMilli()), Member: id})
			p.ZRem(ctx, untilKey, id)
		default:
			p.ZAddNX(ctx, key, redis.Z{Score: float64(at.UnixMilli()), Member: id})
			p.ZAdd(ctx, untilKey, redis.Z{Score: float64(until.UnixMilli()), Member: id})
		}
		return nil
	})
}

// dropEndedPauses takes the runtime schedules whose pause ended by itself
// out of the paused index (their flags expired on the lock masters).
func (c *Cluster) dropEndedPauses(ctx context.Context) {
	ns := c.cfg.Namespace
	ended, err := c.queue.ZRangeByScore(ctx, schedulesPausedUntilKey(ns), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(time.Now().UnixMilli(), 10)}).Result()
	if err != nil || len(ended) == 0 {
		return
	}
	members := make([]any, len(ended))
	for i, id := range ended {
		members[i] = id
	}
	_, _ = c.queue.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, schedulesPausedKey(ns), members...)
		p.ZRem(ctx, schedulesPausedUntilKey(ns), members...)
		return nil
	})
}

// schedulesStatus reads the summary of the runtime schedules: refusals of
// the live replicas (members) only.
func (c *Cluster) schedulesStatus(ctx context.Context, members []roster.Member) (*SchedulesStatus, error) {
	ns := c.cfg.Namespace
	c.dropEndedPauses(ctx)
	var (
		paused       *redis.IntCmd
		counts       []*redis.IntCmd // failing, by shard
		first        *redis.StringSliceCmd
		failingFirst []*redis.ZSliceCmd // by shard
		refused      *redis.MapStringStringCmd
		wentBack     *redis.MapStringStringCmd
	)
	_, err := c.queue.Pipelined(ctx, func(p redis.Pipeliner) error {
		paused = p.ZCard(ctx, schedulesPausedKey(ns))
		first = p.ZRange(ctx, schedulesPausedKey(ns), 0, schedulesListed-1)
		refused = p.HGetAll(ctx, schedulesRefusedKey(ns))
		wentBack = p.HGetAll(ctx, schedulesWentBackKey(ns))
		for _, k := range runlog.FailingKeys(c.cfg) {
			counts = append(counts, p.ZCard(ctx, k))
			failingFirst = append(failingFirst, p.ZRangeWithScores(ctx, k, 0, schedulesListed-1))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("baton: runtime schedules: %w", err)
	}
	count, err := c.schedules.Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("baton: runtime schedules: %w", err)
	}
	st := &SchedulesStatus{Count: count, Paused: paused.Val(), PausedFirst: first.Val()}
	live := map[string]bool{}
	for _, m := range members {
		live[m.ID] = m.Live
	}
	seen := map[string]bool{}
	for replica, v := range refused.Val() {
		var rep refusalReport
		if !live[replica] || json.Unmarshal([]byte(v), &rep) != nil {
			continue
		}
		// replicas of one config refuse the same ones: the largest count
		// stands for all
		st.Refused = max(st.Refused, rep.Count)
		for _, p := range rep.First {
			if !seen[p.ID] {
				seen[p.ID] = true
				st.RefusedFirst = append(st.RefusedFirst, p)
			}
		}
	}
	slices.SortFunc(st.RefusedFirst, func(a, b ScheduleProblem) int { return strings.Compare(a.ID, b.ID) })
	if len(st.RefusedFirst) > schedulesListed {
		st.RefusedFirst = st.RefusedFirst[:schedulesListed]
	}
	st.Refused = max(st.Refused, len(st.RefusedFirst))
	// the replicas' reports of one loss: the one that put back most (the
	// others found it restored by another), of the newest loss
	var reports []StoreWentBack
	for _, v := range wentBack.Val() {
		var w StoreWentBack
		if json.Unmarshal([]byte(v), &w) == nil && time.Since(w.At) < storeWentBackFor {
			reports = append(reports, w)
		}
	}
	for _, w := range reports {
		if st.WentBack == nil || w.At.After(st.WentBack.At) {
			st.WentBack = &w
		}
	}
	for _, w := range reports {
		if b := st.WentBack; st.WentBack.At.Sub(w.At) < time.Minute && w.PutBack+w.Deleted > b.PutBack+b.Deleted {
			st.WentBack = &w
		}
	}
	// the earliest failures of all shards
	var failed []redis.Z
	for k := range counts {
		st.Failing += counts[k].Val()
		failed = append(failed, failingFirst[k].Val()...)
	}
	slices.SortFunc(failed, func(a, b redis.Z) int {
		if a.Score != b.Score {
			return cmp.Compare(a.Score, b.Score)
		}
		return strings.Compare(fmt.Sprint(a.Member), fmt.Sprint(b.Member))
	})
	var ids []string
	for _, z := range failed[:min(len(failed), schedulesListed)] {
		ids = append(ids, fmt.Sprint(z.Member))
	}
	if err := c.failingSchedules(ctx, st, ids); err != nil {
		return st, err
	}
	return st, nil
}

// failingSchedules tells, from their histories (one pipelined read), how
// many runs of each of ids failed in a row, and the last reason.
func (c *Cluster) failingSchedules(ctx context.Context, st *SchedulesStatus, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = config.ScheduleJobName(id)
	}
	hist, err := history.ReadJobs(ctx, c.queue, c.cfg.Namespace, names, historyScan)
	if err != nil {
		return fmt.Errorf("baton: runtime schedules: failing ones: %w", err)
	}
	for i, id := range ids {
		recs := hist[names[i]]
		n, _ := jobs.FailureStreak(recs)
		what, failed := "failed runs", jobs.Status.Failed
		if r := refusedStreak(recs); r > 0 {
			n, what, failed = r, "ticks refused", func(s jobs.Status) bool { return s == jobs.StatusRefused }
		}
		why := fmt.Sprintf("%d %s in a row", n, what)
		if n >= historyScan {
			why = fmt.Sprintf("%d or more %s in a row", n, what)
		}
		for _, r := range recs {
			if failed(r.Status) {
				if r.Reason != "" {
					why += "; last: " + strings.SplitN(r.Reason, "\n", 2)[0]
				}
				break
			}
		}
		st.FailingFirst = append(st.FailingFirst, ScheduleProblem{ID: id, Job: names[i], Why: why})
	}
	return nil
}

// refusedStreak is how many of recs' ticks (newest first) were refused
// (no live replica could run them, say) since the newest run that ended
// otherwise; 0 when that run is newer than any refusal.
func refusedStreak(recs []jobs.RunRecord) int {
	n := 0
	for _, r := range recs {
		switch {
		case r.Status == jobs.StatusRefused:
			n++
		case r.Status == jobs.StatusOK || r.Status.Failed():
			return n
		}
	}
	return n
}

// scheduleStoreWentBack reports that the replica found the runtime schedule
// store gone back, and what it put back: an ERROR, and a record the status
// shows for a day (the metric counts it: Follower.WentBackCount).
func (r *Replica) scheduleStoreWentBack(wb schedstore.WentBack) {
	r.log.Error("runtime schedules: the store went back (the queue Redis restarted without persistence, or from an older snapshot): put back what this replica had read; run the queue Redis with appendonly yes",
		slog.Int("shard", wb.Shard), slog.Int64("had_version", wb.Had), slog.Int64("found_version", wb.Now),
		slog.Int("put_back", wb.PutBack), slog.Int("deleted_again", wb.Deleted), slog.Int("changed_since_kept", wb.Kept),
		slog.Int("restored_by_another", wb.Superseded), slog.Bool("restored_by_a_newer_copy", wb.Newer), slog.Duration("took", wb.Took))
	w := StoreWentBack{At: time.Now().UTC(), Replica: r.id, Shard: wb.Shard, Had: wb.Had, Now: wb.Now,
		PutBack: wb.PutBack, Deleted: wb.Deleted, Kept: wb.Kept, Superseded: wb.Superseded}
	b, _ := json.Marshal(w)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	key := schedulesWentBackKey(r.cfg.Namespace)
	if _, err := r.queue.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, r.id, b)
		p.PExpire(ctx, key, storeWentBackFor)
		return nil
	}); err != nil {
		r.log.Warn("cannot record in Redis that the runtime schedule store went back", slog.Any("error", err))
	}
}

// reportRefusals writes, while ctx lasts, the runtime schedules the
// replica's follower refuses into the status's hash, each time they
// change (checked every second, in memory), and removes the replica's
// entry at the end.
func (r *Replica) reportRefusals(ctx context.Context) {
	key := schedulesRefusedKey(r.cfg.Namespace)
	last := ""
	write := func() {
		refused := r.follower.Refused()
		rep := refusalReport{Count: len(refused)}
		for _, f := range refused[:min(len(refused), schedulesListed)] {
			rep.First = append(rep.First, ScheduleProblem{ID: f.ID, Job: config.ScheduleJobName(f.ID), Why: f.Err.Error()})
		}
		b, _ := json.Marshal(rep)
		if string(b) == last {
			return
		}
		rep.At = time.Now().UnixMilli()
		v, _ := json.Marshal(rep)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		if rep.Count == 0 {
			err = r.queue.HDel(wctx, key, r.id).Err()
		} else {
			err = r.queue.HSet(wctx, key, r.id, v).Err()
		}
		if err == nil {
			last = string(b)
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		write()
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			r.queue.HDel(dctx, key, r.id)
			cancel()
			return
		case <-tick.C:
		}
	}
}
