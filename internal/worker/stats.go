package worker

import (
	"sync/atomic"

	"github.com/batonhq/baton/config"
)

// Stats counts a worker's runs since it was made.
type Stats struct {
	// Ran counts runs that finished successfully.
	Ran uint64
	// Failed counts runs that ended with an error, or could not start (an
	// unknown job, a bad task, a lock error): the ones asynq retries or
	// archives.
	Failed uint64
	// Skipped counts ticks not run because another run held the job
	// (forbid), or a newer tick held it (replace), or it was a duplicate
	// local dispatch of a running tick.
	Skipped uint64
	// Replaced counts runs stopped, or waits given up, because a newer tick
	// of their replace-policy job asked for the job.
	Replaced uint64
	// Dropped counts ticks of a buffering job (buffer_one, buffer_all) not
	// run because the job was running and its buffer was full.
	Dropped uint64
	// Stopped counts runs stopped on request: their runtime schedule was
	// deleted with its runs stopped.
	Stopped uint64
}

type counters struct {
	ran, failed, skipped, replaced, dropped, stopped atomic.Uint64
}

// Stats returns the run counters, summed over the jobs.
func (e *engine) Stats() Stats { return e.stats.snapshot() }

// JobStats returns the run counters of each job of the config, by name.
// Tasks of jobs not in the config count in Stats only.
func (e *engine) JobStats() map[string]Stats {
	out := make(map[string]Stats, len(e.cfg.Jobs))
	for i := range e.cfg.Jobs {
		name := e.cfg.Jobs[i].Name
		if c := e.jobCounters(name); c != nil {
			out[name] = c.snapshot()
		} else {
			out[name] = Stats{}
		}
	}
	return out
}

func (c *counters) snapshot() Stats {
	return Stats{Ran: c.ran.Load(), Failed: c.failed.Load(), Skipped: c.skipped.Load(), Replaced: c.replaced.Load(), Dropped: c.dropped.Load(), Stopped: c.stopped.Load()}
}

// count counts with f on the totals and, for a job of the config, on the
// job's counters.
func (e *engine) count(job string, f func(*counters)) {
	f(&e.stats)
	if config.IsScheduleJob(job) {
		// JobStats reads the job list's only: a runtime schedule counts in
		// Stats (and in the run metrics as job "@"), with no per-schedule
		// counters to grow with their number, nor a lookup that reads
		// Redis for one deleted meanwhile
		return
	}
	if _, ok := e.cfg.Job(job); !ok {
		return // bounded by the job list: a task's name is not a label
	}
	if c := e.jobCounters(job); c != nil {
		f(c)
		return
	}
	c, _ := e.byJob.LoadOrStore(job, &counters{})
	f(c.(*counters))
}

func (e *engine) jobCounters(job string) *counters {
	if c, ok := e.byJob.Load(job); ok {
		return c.(*counters)
	}
	return nil
}
