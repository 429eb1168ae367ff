// Package jobs is what a Go program uses to write baton jobs and read what
// they did: a Handler registered by name in a Registry runs a job whose
// config says handler: NAME; it receives a Run (the job, its tick, run id,
// attempt, fencing token and replica; exec and http jobs get the same as
// BATON_* environment variables and X-Baton-* headers), and a run's
// execution produces a Result. The run history's records are here too
// (RunRecord, one per run or tick that did not run; baton.Cluster's History
// reads them), and FailureStreak tells how long a job has been failing. The
// package links no Redis client: a program that only writes handlers
// builds on the standard library, YAML and cron.
//
// The job list itself (YAML, types, validation) is package config. The
// engines that run jobs are internal to baton and put together by
// baton.New: internal/handoff hands a scheduler's ticks to asynq or to a
// local run, internal/worker runs them under their concurrency policies,
// internal/executor executes exec, http and handler jobs,
// internal/singleton runs singleton jobs, internal/roster tells which
// replica runs what during a rolling deploy, internal/runlog writes the
// history and internal/history reads it back into RunRecords.
//
// # Exported names
//
// Writing a job: a [Handler] (or a [HandlerFunc]) registered in a
// [Registry] ([NewRegistry]) receives a [Run] (with the [Slot] of its
// job's limit, if any); an execution, of an exec or http job too,
// produces a [Result].
//
// What ran: a [RunRecord] per run, each with a [Status]; [FailureStreak]
// counts a job's failures. A value in Redis that is not what baton wrote is
// [ErrCorrupt] (a [CorruptError] names it).
package jobs
