// Package jobs is what a Go program uses to write baton jobs and read what
// they did: a Handler registered by name in a Registry runs a job whose
// config says handler: NAME; it receives a Run (the job, its tick, run id,
// attempt, fencing token and replica; exec and http jobs get the same as
// BATON_* environment variables and X-Baton-* headers), and a run's
// execution produces a Result. ReadHistory and ReadHistories read the run
// history (RunRecord, one per run or tick that did not run), FailureStreak
// tells how long a job has been failing, and HistoryCoverage from when the
// history can tell whether a tick ran.
//
// The job list itself (YAML, types, validation) is package config. The
// engines that run jobs are internal to baton and put together by
// baton.New: internal/handoff hands a scheduler's ticks to asynq or to a
// local run, internal/worker runs them under their concurrency policies,
// internal/executor executes exec, http and handler jobs,
// internal/singleton runs singleton jobs, internal/roster tells which
// replica runs what during a rolling deploy, and internal/runlog writes the
// history this package reads.
//
// # Exported names
//
// Writing a job: a [Handler] (or a [HandlerFunc]) registered in a
// [Registry] ([NewRegistry]) receives a [Run]; an execution, of an exec or
// http job too, produces a [Result].
//
// Reading what ran: [ReadHistory], [ReadHistories] and [ReadHistoriesSince]
// return [RunRecord] values, each with a [Status]; [FailureStreak] counts a
// job's failures, [HistoryCoverage] and [HistoryCoverages] tell from when a
// history is whole. A value in Redis that is not what baton wrote is
// [ErrCorrupt] (a [CorruptError] names it).
package jobs
