package worker

import (
	"strconv"

	"github.com/batonhq/baton/scheduler"
)

// The worker's keys and channels on the queue Redis.

// tickRecordKey is tick t's ledger record on the queue Redis.
func tickRecordKey(ns string, t scheduler.Tick) string {
	return ns + ":{" + t.Job + "}:tickrec:" + t.ID()
}

// bufferKeys are the buffer script's keys for job: the kept ticks, their
// liveness deadlines, the next-tick mark.
func bufferKeys(namespace, job string) []string {
	k := namespace + ":{exec:" + job + "}:buffer"
	return []string{k, k + ":alive", k + ":next"}
}

// cancelChannel is the channel of job's replace requests.
func cancelChannel(ns, job string) string { return ns + ":cancel:" + job }

// holderKey is the record of who holds job's execution lease.
func holderKey(ns, job string) string { return ns + ":{exec:" + job + "}:holder" }

// slotHolderKey is the record of who holds slot i of limit.
func slotHolderKey(ns, limit string, i int) string {
	return ns + ":{limit:" + limit + "}:holder:" + strconv.Itoa(i)
}

// asynqCancelChannel is asynq's cancel channel (base.CancelChannel).
const asynqCancelChannel = "asynq:cancel"

// asynqCancelRedirect is where the worker's asynq server listens for
// asynq's cancel requests instead of asynqCancelChannel (see
// cancelRedirect).
func asynqCancelRedirect(ns string) string { return ns + ":asynq-cancel" }
