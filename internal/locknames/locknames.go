// Package locknames names the locks and elections baton takes for itself
// on the lock masters, so that the worker, the singletons, the replica's
// leader election and `baton lock` agree on them.
package locknames

import (
	"strings"

	"github.com/batonhq/baton/config"
)

// Internal reports whether name is one baton uses for its own leases
// (execution leases, allow jobs' fences, singleton and leader elections,
// the slots of limits):
// `baton lock` refuses it, so a user's lock cannot take a job's lease by
// accident.
func Internal(name string) bool {
	return strings.HasPrefix(name, "exec:") || strings.HasPrefix(name, "fence:") || strings.HasPrefix(name, "singleton:") ||
		strings.HasPrefix(name, "limit:") || strings.HasPrefix(name, "sem:limit:") ||
		name == ClusterLeader || strings.HasPrefix(name, ClusterLeader+":")
}

// ClusterLeader is the election of the replica that runs leader: true jobs.
const ClusterLeader = "cluster-leader"

// Held is the name of the lock job's runs hold, as locking.Client.Held
// lists it: its execution lease ("exec:JOB") for forbid and replace jobs,
// its election's lock for a singleton, "" for an allow job (its runs hold
// none).
func Held(job *config.Job) string {
	switch {
	case job.Mode == config.ModeSingleton:
		return "election:" + Singleton(job.Name)
	case job.Concurrency == config.ConcurrencyAllow:
		return ""
	}
	return Exec(job.Name)
}

// Limit is the semaphore name of a limit shared by jobs (config limits:):
// its slots are the locks "sem:limit:NAME#0" to "#N-1".
func Limit(name string) string { return "limit:" + name }

// Exec is the lock name of job's execution lease.
func Exec(job string) string { return "exec:" + job }

// Fence is the lock an allow job's runs take their fences from.
func Fence(job string) string { return "fence:" + job }

// Singleton is the election name of a singleton job.
func Singleton(job string) string { return "singleton:" + job }
