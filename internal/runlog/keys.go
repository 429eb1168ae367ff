package runlog

import "strconv"

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

// FailingKey is the sorted set of namespace ns's runtime schedules whose
// newest run failed: id -> when the failures began (ms).
func FailingKey(ns string) string { return ns + ":{schedules}:failing" }
