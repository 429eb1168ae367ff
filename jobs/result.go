package jobs

import "time"

// Result is what one execution produced.
type Result struct {
	// Output is the end of an exec job's combined stdout and stderr (the
	// last the worker's output limit bytes), or the beginning of an http job's
	// response body (the first the worker's output limit bytes). Nil for handlers.
	Output []byte
	// ExitCode is an exec job's exit code, 128+n if it died of signal n,
	// -1 if it did not start, was killed at the validity deadline (see
	// KilledByDeadline), or its supervisor was lost.
	ExitCode int
	// Status is an http job's response status code, 0 without a response.
	Status int
	// Duration is how long Execute took.
	Duration time.Duration
	// KilledByDeadline is true when an exec job's supervisor signalled
	// the command because the validity deadline passed.
	KilledByDeadline bool
}
