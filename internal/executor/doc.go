// Package executor runs one execution of a job: an exec job's command
// under a supervisor process (killed at the run's lease validity deadline
// at the latest, G3), an http job's request, or a Go handler from a
// jobs.Registry. Execute returns what it produced (jobs.Result): the tail of
// an exec job's output, the beginning of an http job's response body, the
// exit code or status. The worker and the singleton runner call it through
// Runner; a program may wrap it.
package executor
