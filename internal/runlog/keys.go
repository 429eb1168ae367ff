package runlog

import (
	"strconv"

	"github.com/batonhq/baton/config"
)

// Key is the stream that holds job's history in namespace ns, on the
// queue Redis.
func Key(ns, job string) string { return ns + ":{history:" + job + "}" }

// ListKey is the list that holds the history of job, a runtime schedule
// (see Compact), in namespace ns, on the queue Redis.
func ListKey(ns, job string) string { return Key(ns, job) + ":list" }

// onceKey marks that tick's not-run record of status was written, beside
// the stream (same hash slot); it lives the history's max age.
func onceKey(ns, job, status string, atMillis int64) string {
	return Key(ns, job) + ":" + status + ":" + strconv.FormatInt(atMillis, 10)
}

// FailingKey is the sorted set of the runtime schedules of schedule id's
// shard (config.ScheduleKeysOf) whose newest run failed: id -> when the
// failures began (ms). It shares its shard's slot with the definitions.
func FailingKey(cfg *config.Config, id string) string { return cfg.ScheduleKeysOf(id) + "failing" }

// FailingKeys are the FailingKey of every shard of cfg's runtime schedules.
func FailingKeys(cfg *config.Config) []string {
	out := make([]string, cfg.Schedules.Shards)
	for k := range out {
		out[k] = config.ScheduleKeys(cfg.Namespace, k, cfg.Schedules.Shards) + "failing"
	}
	return out
}
