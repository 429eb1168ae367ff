package batontest

// namespacePatterns match every key of namespace ns on the queue Redis:
// baton's own (NS:..., the runtime schedules' NS:{schedules}:... among
// them), the roster's ({NS:roster}...) and asynq's of the namespace's
// queues (asynq:{NS:QUEUE}:...).
func namespacePatterns(ns string) []string {
	return []string{ns + ":*", "{" + ns + ":roster}*", "asynq:{" + ns + ":*"}
}

// asynqQueuesKey is asynq's set of every queue name it knows.
const asynqQueuesKey = "asynq:queues"
