package supervisor

import (
	"errors"
	"os"
	"time"
)

// Arg is the argument (os.Args[1]) that makes the baton binary run as a
// supervisor.
const Arg = "__baton_supervise"

// EnvVar set to "1" also makes MaybeRun run the supervisor. Start does not
// set it (it passes Arg); it exists for binaries that cannot take Arg first.
// The supervisor removes it from the child's environment.
const EnvVar = "BATON_SUPERVISOR"

// TreeEnv is the variable the supervisor sets in its child's environment to
// a value of its own, random for every Start. Every process of the run
// inherits it unless it clears its environment; when a supervisor dies
// before its run's processes (a job that SIGKILLs it), the process that
// started it recognizes by it the orphans reparented to it, and kills them.
const TreeEnv = "BATON_TREE"

// Exit codes of the supervisor besides the child's own.
const (
	// ExitDeadline means the supervisor signalled the child's process group
	// because the validity deadline passed. It also writes one line to
	// stderr saying so.
	ExitDeadline = 254
	// ExitFailure means the supervisor could not do its job: it was run
	// without its pipes, got a malformed request, or could not start the
	// child (Start reports that as an error).
	ExitFailure = 255
)

// Defaults of Spec.
const (
	// DefaultGrace is the time between SIGTERM and SIGKILL.
	DefaultGrace = 5 * time.Second
	// DefaultMargin is how long before the deadline the SIGKILL is sent.
	DefaultMargin = 50 * time.Millisecond
)

// Errors.
var (
	// ErrDeadline is returned (wrapped) by Wait when the supervisor
	// signalled the child because the validity deadline passed, and by
	// Start when the deadline passed before the child could start.
	ErrDeadline = errors.New("supervisor: validity deadline passed")
	// ErrDone is returned (wrapped) by Extend and Stop once the supervisor
	// has exited.
	ErrDone = errors.New("supervisor: process has exited")
)

// beforeReport, if set (by tests), runs in the supervisor after the child
// started and before its pid is reported.
var beforeReport func()

// MaybeRun runs the supervisor and exits if this process was started as one
// (os.Args[1] == Arg, or EnvVar=1); otherwise it returns at once. Call it
// first thing in main, and in TestMain of tests that start supervisors with
// Spec.Path = os.Args[0].
func MaybeRun() {
	if (len(os.Args) > 1 && os.Args[1] == Arg) || os.Getenv(EnvVar) == "1" {
		Main()
	}
}
