// Package singleton runs mode: singleton jobs: one long-running holder
// cluster-wide
// (G6). Every replica campaigns in the job's election, lock
// "singleton:<job>" with ttl = the job's lock_ttl; the leader runs the job
// under its term (the term's lease is the run's Validity, so an exec child is
// killed at the lease's validity deadline at the latest, G3) and restarts it
// with restart_backoff when it exits while still leading.
//
// Jobs is the runner of a config's singleton jobs; Holders tells who leads
// each, for `baton status`.
package singleton
