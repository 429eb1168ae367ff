package baton

import (
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// ReplicaStats is what a replica has counted and measured since New, read
// at once by Replica.Stats. Package batonhttp serves it as Prometheus
// metrics at /metrics (the metric of each field is named in its comment);
// a program that exports metrics another way reads it itself. Counters only
// grow; the maps are the caller's.
type ReplicaStats struct {
	// ID, Version and Role are the replica's; JobList is the hash of its
	// job list, as the roster names it (replicas whose hashes differ run
	// different job lists). baton_replica_info.
	ID, Version string
	Role        Role
	JobList     string
	// Scheduler is nil when the replica runs no scheduler (RoleWorker).
	Scheduler *SchedulerStats
	// Locks are the lock client's counters (baton_lock_acquisitions_total,
	// baton_lock_extensions_total, baton_lock_extension_failures_total,
	// baton_lock_leases_lost_total, baton_lock_wait_seconds_total).
	Locks locking.Stats
	// Masters are the lock masters as the lock client last found them,
	// without contacting them (baton_lock_master_quarantine_remaining_seconds).
	Masters []MasterStats
	// LeaderJobs is true when the job list has leader: true jobs; then
	// ClusterLeader says whether this replica is the cluster leader now
	// (baton_cluster_leader).
	LeaderJobs, ClusterLeader bool
	// Singletons are the singleton jobs this replica leads now
	// (baton_singleton_leader).
	Singletons []string
	// Worker are the worker's run counters by job of the config
	// (baton_worker_ran_total, baton_worker_failed_total,
	// baton_worker_skipped_total, baton_worker_replaced_total,
	// baton_worker_dropped_total).
	Worker map[string]WorkerStats
	// Refused counts the tasks the worker refused and archived without
	// running them, by reason: bad_task (unsigned, forged or misplaced),
	// too_old (past its expiry: a copy put back into a queue), done (its
	// tick's task ended already), paused, job_done (past the job's end, at
	// or max_runs), outside_window (before the job's start)
	// (baton_worker_tasks_refused_total).
	Refused map[string]uint64
	// Schedules counts the runtime schedules this replica follows.
	Schedules ScheduleStats
	// Jobs are the lags, runs and durations measured, by job label
	// (config.MetricJob: the runtime schedules the config does not name
	// count together).
	Jobs map[string]JobMeasures
}

// SchedulerStats are a scheduler's counters.
type SchedulerStats struct {
	// Jobs are the claims' counters by job label (config.MetricJob),
	// summed over the runtime schedules that share one
	// (baton_scheduler_owned_total, _done_total, _busy_total,
	// _missed_total, _paused_total, _dispatched_total,
	// _dispatch_errors_total, _caught_up_total, _early_total,
	// _commit_errors_total, _left_to_others_total).
	Jobs map[string]scheduler.Stats
	// Total sums them; its SkewStops (baton_scheduler_skew_stops_total)
	// and Held (baton_scheduler_held_ticks) are kept as totals only.
	Total scheduler.Stats
	// Skewed is true while the replica's clock is off Redis TIME beyond
	// max_clock_skew: it does not claim (baton_scheduler_clock_skewed).
	Skewed bool
	// ClockSkew is how far the replica's clock was ahead of the lock
	// masters' at the last check, negative when behind
	// (baton_scheduler_clock_skew_seconds).
	ClockSkew time.Duration
}

// MasterStats is a lock master as a replica last found it.
type MasterStats struct {
	// Index is the master's position in locking.masters.
	Index int
	// Quarantine is how long it still waits out its restart quarantine
	// (it does not vote meanwhile; Replica.Waiting says why); 0 while it
	// votes.
	Quarantine time.Duration
}

// WorkerStats are a worker's run counters of one job.
type WorkerStats struct {
	// Ran counts runs that succeeded.
	Ran uint64
	// Failed counts runs that failed or could not start.
	Failed uint64
	// Skipped counts ticks skipped by the concurrency policy.
	Skipped uint64
	// Replaced counts runs stopped by a newer tick (concurrency: replace).
	Replaced uint64
	// Dropped counts ticks of a buffering job dropped because its buffer
	// was full.
	Dropped uint64
	// Stopped counts runs stopped on request (their runtime schedule was
	// deleted with its runs stopped).
	Stopped uint64
}

// ScheduleStats count the runtime schedules a replica follows.
type ScheduleStats struct {
	// Count is how many it holds and runs (baton_schedules).
	Count int
	// Refused is how many stored ones it refuses to run: not signed with
	// the signing keys, corrupt, or not valid for its config (baton status
	// names them; baton_schedules_refused).
	Refused int
	// WentBack counts the times it found the store gone back (the queue
	// Redis restarted without persistence, or from an older snapshot) and
	// put back what it had read (baton_schedules_store_went_back_total).
	WentBack int64
}

// JobMeasures are what a replica measured of the ticks and runs of one
// job label. A histogram is nil until its first observation.
type JobMeasures struct {
	// DispatchLag is from a tick's due instant to its dispatch by this
	// replica (baton_scheduler_dispatch_lag_seconds).
	DispatchLag *Histogram
	// StartLag is from a tick's due instant to the start of its run on
	// this replica (baton_worker_start_lag_seconds).
	StartLag *Histogram
	// Runs are the runs on this replica, and the ticks that did not start,
	// by how they ended: ok, failed, skipped, replaced, dropped, timed
	// out, lease lost (baton_worker_runs_total,
	// baton_worker_run_duration_seconds).
	Runs map[jobs.Status]RunMeasures
	// LastSuccess is when a run last succeeded on this replica; zero for
	// none (baton_worker_last_success_timestamp_seconds).
	LastSuccess time.Time
	// Interval is the shortest interval between two ticks of the job's
	// schedule (its alert windows scale with it); 0 for a job without one,
	// or a label of runtime schedules (baton_job_interval_seconds).
	Interval time.Duration
}

// RunMeasures count the runs of one job label that ended one way.
type RunMeasures struct {
	// Count counts them, the ticks that did not start included.
	Count uint64
	// Duration is how long the ones that started ran; nil while none did.
	Duration *Histogram
}

// Histogram is a distribution of durations, in seconds, read at once: its
// buckets go from a millisecond to a minute for lags, to a day for
// durations.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending (shared by every
	// read: not to be changed).
	Bounds []float64
	// Cumulative[i] counts the observations at most Bounds[i].
	Cumulative []uint64
	// Count counts every observation, those above the last bound too.
	Count uint64
	// Sum is their sum.
	Sum float64
}

// Stats reads what the replica has counted and measured. It contacts no
// server. Safe to call at any time, also concurrently with Run.
func (r *Replica) Stats() ReplicaStats {
	s := ReplicaStats{ID: r.id, Version: r.version, Role: r.role, JobList: r.listHash,
		LeaderJobs: r.leader != nil, ClusterLeader: r.leader.leading(), Jobs: r.metrics.jobs()}
	if r.sched != nil {
		s.Scheduler = &SchedulerStats{Jobs: byLabel(r.cfg, r.sched.JobStats()), Total: r.sched.Stats(),
			Skewed: r.sched.Skewed(), ClockSkew: r.sched.ClockSkew()}
	}
	if r.lockStats != nil {
		s.Locks = r.lockStats()
	}
	if r.lockGroup != nil {
		now := time.Now()
		for _, m := range r.lockGroup.Known() {
			ms := MasterStats{Index: m.Idx}
			if m.State == quorum.StateQuarantine {
				ms.Quarantine = max(m.UntilLocal.Sub(now), 0)
			}
			s.Masters = append(s.Masters, ms)
		}
	}
	if r.singles != nil {
		s.Singletons = r.singles.Leading()
	}
	s.Worker, s.Refused = map[string]WorkerStats{}, map[string]uint64{}
	if r.worker != nil {
		for job, w := range r.worker.JobStats() {
			s.Worker[job] = WorkerStats{Ran: w.Ran, Failed: w.Failed, Skipped: w.Skipped, Replaced: w.Replaced, Dropped: w.Dropped, Stopped: w.Stopped}
		}
		for reason, n := range r.worker.Refusals() {
			s.Refused[string(reason)] = n
		}
	}
	if r.follower != nil {
		s.Schedules = ScheduleStats{Count: r.follower.Len(), Refused: len(r.follower.Refused()), WentBack: r.follower.WentBackCount()}
	}
	return s
}

// HeldTicks is how many ticks the replica's scheduler holds back now
// because the lock masters or the queue fail (claimed with the catch-up
// policy when they answer); 0 without a scheduler. It costs less than
// Stats, which reads every job's counters: /api/status reads it.
func (r *Replica) HeldTicks() int {
	if r.sched == nil {
		return 0
	}
	return int(r.sched.Stats().Held)
}

// byLabel sums stats by their job label (config.MetricJob): the runtime
// schedules the config does not name count together.
func byLabel(cfg *config.Config, stats map[string]scheduler.Stats) map[string]scheduler.Stats {
	out := make(map[string]scheduler.Stats, len(stats))
	for job, s := range stats {
		l := cfg.MetricJob(job)
		if l == job {
			out[l] = s
			continue
		}
		out[l] = addStats(out[l], s)
	}
	return out
}

// addStats returns the sum of the counters of a and b.
func addStats(a, b scheduler.Stats) scheduler.Stats {
	return scheduler.Stats{Owned: a.Owned + b.Owned, Done: a.Done + b.Done, Busy: a.Busy + b.Busy, Missed: a.Missed + b.Missed,
		Paused: a.Paused + b.Paused, Dispatched: a.Dispatched + b.Dispatched, DispatchErrors: a.DispatchErrors + b.DispatchErrors,
		CaughtUp: a.CaughtUp + b.CaughtUp, SkewStops: a.SkewStops + b.SkewStops, Early: a.Early + b.Early,
		CommitErrors: a.CommitErrors + b.CommitErrors, LeftToOthers: a.LeftToOthers + b.LeftToOthers, Held: a.Held + b.Held}
}
