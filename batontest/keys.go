package batontest

// namespacePatterns match every key of namespace ns on the queue Redis:
// baton's own (NS:...) and asynq's of the namespace's queues
// (asynq:{NS:QUEUE}:...).
func namespacePatterns(ns string) []string { return []string{ns + ":*", "asynq:{" + ns + ":*"} }

// asynqQueuesKey is asynq's set of every queue name it knows.
const asynqQueuesKey = "asynq:queues"
