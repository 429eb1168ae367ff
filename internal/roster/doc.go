// Package roster is how replicas with different job lists (every rolling deploy)
// learn about each other. Each replica's worker publishes, every
// BeatEvery, its id, version, role, the queues it consumes and a hash of
// its job list; the job list itself is stored once per distinct hash. A
// worker handed a task it cannot run asks the roster whether a live replica
// can, and `baton status` shows which replicas differ and on which jobs.
//
// Redis names, on the queue Redis (NS is Config.Namespace; one hash tag so a
// Cluster keeps both in one slot):
//
//	{NS:roster}          hash: replica id -> "<seen ms> <JSON member>", seen
//	                     by the queue Redis's clock
//	{NS:roster}:lists    hash: job list hash -> JSON {job: "mode queue digest"}
//	{NS:roster}:clock    string, exists for StepSuspend after a step of the
//	                     queue Redis's clock was seen
//
// A member not seen for rosterForget is removed, and a list no member
// refers to with it; the keys expire rosterKeep after the last heartbeat.
//
// Liveness is read off the queue Redis's clock, so a step of that clock
// (NTP, an operator's date -s) would make every member look dead (forward)
// or forgotten (forward beyond rosterForget). Each replica checks TIME
// against its own monotonic clock at every roster call (clockWatch): TIME
// that moved by more than stepBound beyond the interval the replica measured
// is a step. A step sets the clock key, and while it exists (a heartbeat
// round under the new clock) no member is taken as dead, none is forgotten
// or left out, and a worker hands back a task it would archive. Members
// seen "in the future" (a step back) count as live.
//
// # Two replica registries
//
// The scheduler keeps another list of replicas, NS:replicas on the first
// lock master (scheduler/membership.go), and each answers a different
// question. NS:replicas lists the replicas whose scheduler claims now,
// scored by each replica's own clock; the scheduler reads it only to spread
// the claims (one replica claims each tick first, the others after the
// follower delay), and nothing depends on it for correctness: the tick's
// claim on the lock masters decides. It lives beside the ticks, on the only
// Redis the scheduler talks to, so claiming never waits on the queue Redis.
// The roster lists every replica, workers included, with its version, role,
// queues, job list and max_runs limits, scored by the queue Redis's TIME:
// its answers (hand a task back or archive it, leave a tick past max_runs
// to another list, may `baton init` mark masters, which replicas differ)
// must agree across replicas whose clocks differ. One list could not do
// both without changing behaviour: the roster outlives a scheduler that
// stopped claiming, lists workers, and counts every member as live after a
// clock step, and reading it would tie the claim path to the queue Redis.
package roster
