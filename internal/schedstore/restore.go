package schedstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// When the queue Redis goes back (restarted without persistence, or
// brought back from an older snapshot), the store holds fewer changes than
// a Follower read: schedules put before the loss are gone, deleted ones may
// be back, and older definitions stand for newer ones. The Follower, which
// holds every stored value it read, puts the store back to the newest state
// it saw before it reads the store again:
//
//   - a schedule its copy holds that the store lacks, or holds otherwise,
//     is put back as the copy holds it (its stored value: signed as it
//     was, with its created and updated times);
//   - a schedule the store holds that its copy had seen deleted is deleted
//     again;
//   - a schedule changed in Redis since it went back (put or deleted by a
//     caller: the stream of changes has it after the last change the copy
//     read) is left as the store holds it; when it is the schedule the copy
//     holds (its created) at a version the copy had reached, its version is
//     raised past the copy's, so that no version read before the loss
//     names it (the puts since counted up from the older snapshot's).
//
// Every replica that followed the store across the loss does this, but a
// replica whose copy saw fewer changes than one that claimed the shard's
// restore first writes nothing (its copy may hold what the newer one saw
// deleted); a restore writes only over the record its replica found, or
// over a restore from a copy that had seen fewer changes (restore.lua):
// the copy that saw the most changes wins, whichever replica comes first.
// What a caller changes while a replica restores stands (a delete is
// recorded for the restores to find). A claim raises the shard's version
// to the copy's, so that a later loss compares copies by what they saw.
// A replica that started after the loss knows nothing older and restores
// nothing. A schedule the replica refuses (its config's, not another's)
// is put back too, as it was stored.

// WentBack is what a Follower found and did when a shard of the store went
// back.
type WentBack struct {
	Shard int
	// Had is the shard's version the copy held; Now the store's when the
	// Follower found it gone back.
	Had, Now int64
	// PutBack and Deleted count the schedules this replica put back and
	// deleted again; Kept those changed in Redis since it went back (the
	// store's state stands); Superseded those another replica restored
	// first, or a caller changed meanwhile.
	PutBack, Deleted, Kept, Superseded int
	// Newer: a replica whose copy had seen more changes claimed the
	// shard's restore first; this one wrote nothing.
	Newer bool
	// Took is how long the restore took.
	Took time.Duration
}

// Lost tells whether the store had lost anything the copy held.
func (w WentBack) Lost() bool { return w.PutBack+w.Deleted+w.Superseded > 0 || w.Newer }

// WithWentBack calls report (from the Follower's goroutine) each time it
// finds a shard of the store gone back, after restoring it.
func WithWentBack(report func(WentBack)) FollowerOption {
	return func(f *Follower) { f.wentBackReport = report }
}

// WentBackCount returns how many times the Follower found a shard of the
// store gone back (and restored it).
func (f *Follower) WentBackCount() int64 { return f.wentBackN.Load() }

// splitRecord cuts a stored value into its head's times ("created|updated"),
// its version and its signed definition; ok is false for a value without
// the head.
func splitRecord(v string) (times, ver, body string, ok bool) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return "", "", "", false
	}
	return parts[0] + "|" + parts[1], parts[2], parts[3], true
}

// restoreBatch is how many restores go in one pipeline.
const restoreBatch = 500

// restoreShard puts shard sh back to the copy's state (see above): prev is
// how far the copy had read, now the store's version when the Follower
// found it gone back. It is called under applyMu, before the store's state
// is applied to the copy.
//
// It first claims the shard for its copy (restore.lua): when a copy that
// had seen more changes claimed it first, that copy's restore stands and
// this one writes nothing (Newer), or it would put back what that copy had
// seen deleted; the claim raises the shard's version to the copy's, so
// that every change made since is newer than anything a copy saw before
// the loss. Then it reads the store again (a restore from a copy that saw
// less may have landed since the Follower read it) and restores.
func (f *Follower) restoreShard(ctx context.Context, sh int, prev shardState, now int64) (WentBack, error) {
	began := time.Now()
	wb := WentBack{Shard: sh, Had: prev.ver, Now: now}
	k := f.st.shards[sh]
	keys := append(k.all(), k.restored)
	if err := restoreScript.Load(ctx, f.st.rdb).Err(); err != nil {
		return wb, fmt.Errorf("runtime schedules: restore: %w", err)
	}
	claimed, err := f.st.rdb.EvalSha(ctx, restoreScript.Hash(), keys, "", "", LogLength, "0", prev.ver, "", 0).Int64()
	if err != nil {
		return wb, fmt.Errorf("runtime schedules: restore: claim the shard: %w", err)
	}
	if claimed == 0 {
		wb.Newer = true
		wb.Took = time.Since(began)
		return wb, nil
	}
	readVer, _, raws, _, err := f.readShard(ctx, sh, "")
	if err != nil {
		return wb, err
	}
	touched, err := f.changedSince(ctx, k.log, prev.last)
	if err != nil {
		return wb, err
	}
	type op struct {
		id, times, body, expect string
		raise                   bool // a kept schedule's version raised
	}
	var ops []op
	expectOf := func(id string) string {
		raw, ok := raws[id]
		if !ok {
			return "0"
		}
		_, ver, _, ok := splitRecord(raw)
		if !ok {
			return "?" // a corrupt record: nothing written over it
		}
		return ver
	}
	// the copy: what it runs, and what it refuses (another replica may
	// run it: the store is every replica's), by id
	held := map[string]string{}
	f.mu.RLock()
	for name, e := range f.byName {
		held[idOf(name)] = e.raw
	}
	for id := range f.refused {
		held[id] = f.refusedRaw[id] // "": not known, left as it is
	}
	f.mu.RUnlock()
	for id, raw := range held {
		if f.st.ShardOf(id) != sh {
			continue
		}
		if touched[id] {
			wb.Kept++
			if times, body, ok := raised(raw, raws[id]); ok {
				ops = append(ops, op{id: id, times: times, body: body, expect: expectOf(id), raise: true})
			}
			continue
		}
		times, _, body, ok := splitRecord(raw)
		if !ok {
			continue
		}
		if cur, ok := raws[id]; ok {
			if _, _, b, ok := splitRecord(cur); ok && b == body {
				continue
			}
		}
		ops = append(ops, op{id: id, times: times, body: body, expect: expectOf(id)})
	}
	for id := range raws {
		if _, ok := held[id]; ok {
			continue
		}
		if touched[id] {
			wb.Kept++
			continue
		}
		ops = append(ops, op{id: id, expect: expectOf(id)})
	}
	for len(ops) > 0 {
		batch := ops[:min(len(ops), restoreBatch)]
		ops = ops[len(batch):]
		if f.beforeBatch != nil {
			f.beforeBatch()
		}
		cmds := make([]*redis.Cmd, len(batch))
		_, err := f.st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, o := range batch {
				cmds[i] = p.EvalSha(ctx, restoreScript.Hash(), keys, o.id, o.body, LogLength, o.expect, prev.ver, o.times, readVer)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return wb, fmt.Errorf("runtime schedules: restore: %w", err)
		}
		for i, o := range batch {
			n, err := cmds[i].Int64()
			switch {
			case err != nil:
				return wb, fmt.Errorf("runtime schedules: restore %q: %w", o.id, err)
			case o.raise:
				// counted as kept
			case n == 0:
				wb.Superseded++
			case o.body == "":
				wb.Deleted++
			default:
				wb.PutBack++
			}
		}
	}
	wb.Took = time.Since(began)
	return wb, nil
}

// raised tells how a schedule changed in Redis since it went back (cur,
// its stored value) is written so that its versions do not count again
// through those the copy's value (held) had seen: the same schedule (its
// created) at a version the copy had reached or passed is raised past the
// copy's (its times and definition as Redis holds them), so that a put
// conditioned on a version read before the loss fails over it. ok is false
// when it is left as it is (another schedule of the id, or one past the
// copy's version).
func raised(held, cur string) (times, body string, ok bool) {
	heldTimes, _, heldBody, ok1 := splitRecord(held)
	curTimes, _, curBody, ok2 := splitRecord(cur)
	if !ok1 || !ok2 {
		return "", "", false
	}
	heldCreated, _, _ := strings.Cut(heldTimes, "|")
	curCreated, _, _ := strings.Cut(curTimes, "|")
	hc, ok1 := decimal(heldCreated)
	cc, ok2 := decimal(curCreated)
	heldVer, _, ok3 := splitOwn(heldBody)
	curVer, def, ok4 := splitOwn(curBody)
	if !ok1 || !ok2 || !ok3 || !ok4 || hc != cc || curVer > heldVer {
		return "", "", false
	}
	return curTimes, strconv.FormatInt(heldVer+1, 10) + "|" + def, true
}

// changedSince returns the ids of the changes after stream entry last in
// log that are not restores: what callers put or deleted since the store
// went back.
func (f *Follower) changedSince(ctx context.Context, log, last string) (map[string]bool, error) {
	out := map[string]bool{}
	start := "(" + last
	for {
		msgs, err := f.st.rdb.XRangeN(ctx, log, start, "+", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("runtime schedules: read the changes since Redis went back: %w", err)
		}
		for _, m := range msgs {
			if _, restore := m.Values["restore"]; restore {
				continue
			}
			if id, ok := m.Values["id"].(string); ok {
				out[id] = true
			}
		}
		if len(msgs) < 1000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
