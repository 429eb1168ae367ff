package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// StopBeforeReportEnv, set to 1 in a supervisor's environment (Spec.Env),
// makes the supervisor stop itself (SIGSTOP) once the child runs, before it
// reports the child's pid.
const StopBeforeReportEnv = "SUPERVISOR_TEST_STOP_BEFORE_REPORT"

func init() {
	beforeReport = func() {
		if os.Getenv(StopBeforeReportEnv) == "1" {
			// to this thread: a signal to the process may be taken by
			// another thread while this one writes the report
			_ = unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGSTOP)
		}
	}
}
