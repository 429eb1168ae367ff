// Package jobs is what runs baton's jobs: the asynq worker that executes
// dispatched ticks under their execution leases, the executors for exec,
// http and Go handler jobs, the dispatcher that turns a scheduler's ticks
// into asynq tasks (or local runs), singleton workers, and the signed task
// format replicas hand each other through Redis.
//
// The job list itself (YAML, types, validation) is package config; jobs
// takes a *config.Config and never reads YAML. A run knows its job, tick,
// run id, attempt, fencing token and replica (Run); a Handler registered by
// name in a Registry receives it, and exec and http jobs get the same as
// BATON_* environment variables and X-Baton-* headers.
package jobs
