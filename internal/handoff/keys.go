package handoff

import (
	"strconv"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/scheduler"
)

// The hand-off's keys on the queue Redis, and asynq's keys it reads.

// RunCountKeys are the queue Redis keys that count the dispatched ticks of
// a job with max_runs: the count, and the counted ticks (recent ones).
func RunCountKeys(namespace, job string) []string {
	base := namespace + ":{" + job + "}:runs:"
	return []string{base + "count", base + "ticks"}
}

// JobRunCountKeys are RunCountKeys of job j: a runtime schedule's are its
// incarnation's (NS:{@ID}:runs:<created ms>:count and :ticks), so that a
// schedule deleted and put again under its id counts its max_runs anew,
// whatever a replica still following the deleted one dispatches of it.
func JobRunCountKeys(namespace string, j *config.Job) []string {
	if j.Created.IsZero() {
		return RunCountKeys(namespace, j.Name)
	}
	base := namespace + ":{" + j.Name + "}:runs:" + strconv.FormatInt(j.Created.UnixMilli(), 10) + ":"
	return []string{base + "count", base + "ticks"}
}

// bindingKey is tick t's queue binding.
func bindingKey(ns string, t scheduler.Tick) string { return ns + ":{" + t.ID() + "}:queue" }

// asynq's Redis layout (v0.2x), which the dispatcher reads to find a task
// ID in another queue; TestAsynqKeyLayout guards it.
// AsynqQueuesKey is the set of every queue asynq knows.
const AsynqQueuesKey = "asynq:queues"

// AsynqTaskKey is the hash of task id in asynq queue (its full name).
func AsynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }
