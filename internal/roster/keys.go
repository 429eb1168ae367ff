package roster

// Keys are the roster's keys on the queue Redis, in one hash slot: the
// members' entries (a hash by member key), the job lists they run (a hash
// by list hash) and the last clock reading of each member.
func Keys(ns string) []string {
	k := "{" + ns + ":roster}"
	return []string{k, k + ":lists", k + ":clock"}
}

// Field is the field of r's own entry in the members' hash (Keys(ns)[0]).
func (r *Roster) Field() string { return r.self.key }

// asynqStateKeys are asynq's lists of a queue's tasks by state (asynq's
// layout, read by QueuedTaskOf): pending, active, scheduled, retry.
func asynqStateKeys(queue string) []string {
	base := "asynq:{" + queue + "}:"
	return []string{base + "pending", base + "active", base + "scheduled", base + "retry"}
}
