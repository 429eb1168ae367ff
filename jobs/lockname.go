package jobs

import (
	"strings"

	"github.com/batonhq/baton/config"
)

// InternalLockName reports whether name is one baton uses for its own
// leases (execution leases, allow jobs' fences, singleton and leader
// elections): `baton lock`
// refuses it, so a user's lock cannot take a job's lease by accident.
func InternalLockName(name string) bool {
	return strings.HasPrefix(name, "exec:") || strings.HasPrefix(name, "fence:") || strings.HasPrefix(name, "singleton:") ||
		name == ClusterLeaderElection || strings.HasPrefix(name, ClusterLeaderElection+":")
}

// ClusterLeaderElection is the election of the replica that runs leader:
// true jobs.
const ClusterLeaderElection = "cluster-leader"

// LockName is the name of the lock job's runs hold, as locking.Client.Held
// lists it: its execution lease ("exec:JOB") for forbid and replace jobs,
// its election's lock for a singleton, "" for an allow job (its runs hold
// none).
func LockName(job *config.Job) string {
	switch {
	case job.Mode == config.ModeSingleton:
		return "election:" + singletonElection(job.Name)
	case job.Concurrency == config.ConcurrencyAllow:
		return ""
	}
	return execLockName(job.Name)
}

// execLockName is the lock name of job's execution lease.
func execLockName(job string) string { return "exec:" + job }

// fenceLockName is the lock an allow job's runs take their fences from.
func fenceLockName(job string) string { return "fence:" + job }
