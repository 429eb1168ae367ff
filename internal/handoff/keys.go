package handoff

import "github.com/batonhq/baton/scheduler"

// The hand-off's keys on the queue Redis, and asynq's keys it reads.

// RunCountKeys are the queue Redis keys that count the dispatched ticks of
// a job with max_runs: the count, and the counted ticks (recent ones).
func RunCountKeys(namespace, job string) []string {
	base := namespace + ":{" + job + "}:runs:"
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
