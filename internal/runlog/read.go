package runlog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// A job's history is kept in one of two forms, read alike (QueueRead): a
// stream for a job of the list, a list for a runtime schedule. A Redis
// stream costs at least 4.7 KB however little it holds (its first node is
// allocated whole); a deployment may have 100,000 runtime schedules with a
// few runs each, and a small list costs what it holds.

// Compact reports whether job's history is a list (a runtime schedule's).
func Compact(job string) bool { return config.IsScheduleJob(job) }

// Events is a queued read of a job's history (QueueRead, QueueOldest):
// after the pipeline ran, its entries, as stream entries.
type Events interface {
	Result() ([]redis.XMessage, error)
}

// QueueRead queues on pipe the read of job's history entries written at or
// after minMS (unix ms; 0: all), newest first, at most count of them (0:
// all).
func QueueRead(ctx context.Context, pipe redis.Pipeliner, ns, job string, minMS, count int64) Events {
	if Compact(job) {
		start := int64(0)
		if count > 0 {
			start = -count
		}
		return listRead{cmd: pipe.LRange(ctx, ListKey(ns, job), start, -1), key: ListKey(ns, job), minMS: minMS}
	}
	min := strconv.FormatInt(minMS, 10)
	if count > 0 {
		return pipe.XRevRangeN(ctx, Key(ns, job), "+", min, count)
	}
	return pipe.XRevRange(ctx, Key(ns, job), "+", min)
}

// QueueOldest queues on pipe the read of job's oldest history entry.
func QueueOldest(ctx context.Context, pipe redis.Pipeliner, ns, job string) Events {
	if Compact(job) {
		return listRead{cmd: pipe.LRange(ctx, ListKey(ns, job), 0, 0), key: ListKey(ns, job)}
	}
	return pipe.XRangeN(ctx, Key(ns, job), "-", "+", 1)
}

// listRead is a read of a history list.
type listRead struct {
	cmd   *redis.StringSliceCmd
	key   string
	minMS int64
}

// Result returns the entries, newest first. An element that is not an
// entry is an error naming the key and the element.
func (l listRead) Result() ([]redis.XMessage, error) {
	elems, err := l.cmd.Result()
	if err != nil {
		return nil, err
	}
	out := make([]redis.XMessage, 0, len(elems))
	for i := len(elems) - 1; i >= 0; i-- {
		m, ok := parseListEntry(elems[i])
		if !ok {
			return nil, fmt.Errorf("%s: element %q is not a history entry (\"<ms>-<seq> [field, value, ...]\")", l.key, cut(elems[i], 60))
		}
		if ms, _, _ := strings.Cut(m.ID, "-"); l.minMS > 0 {
			if n, _ := strconv.ParseInt(ms, 10, 64); n < l.minMS {
				continue
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// parseListEntry reads "<ms>-<seq> [field, value, ...]", in the short form
// (listcodec.go), the earlier short form or the long one.
func parseListEntry(s string) (redis.XMessage, bool) {
	id, rest, ok := strings.Cut(s, " ")
	ms, seq, ok2 := strings.Cut(id, "-")
	if !ok || !ok2 || !digits(ms) || !digits(seq) {
		return redis.XMessage{}, false
	}
	var fields []string
	if err := json.Unmarshal([]byte(rest), &fields); err != nil || len(fields)%2 != 0 {
		return redis.XMessage{}, false
	}
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return redis.XMessage{}, false
	}
	return redis.XMessage{ID: id, Values: longFields(fields, at)}, true
}

func digits(s string) bool {
	return s != "" && !slices.ContainsFunc([]byte(s), func(c byte) bool { return c < '0' || c > '9' })
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
