// Package supervisor runs an exec job's child under a small watchdog process
// so that the child never outlives the lease it runs under, nor the baton
// replica that started it, even when baton itself is frozen (a long GC pause,
// CPU starvation, SIGSTOP).
//
// The watchdog is the baton binary itself in a hidden mode: Start runs
// Spec.Path (default os.Executable()) with the single argument Arg, and the
// binary's main calls MaybeRun first thing, which turns the process into the
// supervisor (Main). The supervisor starts the child in a process group of
// its own and then keeps two deadlines on its own timers: SIGTERM to the
// child's process group at "deadline - grace - margin" and SIGKILL at
// "deadline - margin". The parent moves the deadline with Extend after every
// confirmed lease extension; if no extension arrives, because the lease is
// lost or because baton is frozen, the supervisor acts anyway.
//
// In the supervisor (serve_linux.go), serve reads the request, starts the
// child and reports its pid; supervise then waits for the child's exit,
// control lines and signals, and sends what its watchdog (watchdog_linux.go)
// has due: the two deadlines above, moved by every extension, and a stop's
// SIGTERM at once and SIGKILL after the stop's grace, each signal once.
//
// Deadlines travel as absolute CLOCK_BOOTTIME nanoseconds, a clock that both
// processes share on one host, that no wall-clock step moves, and that keeps
// counting while the host is suspended (as Redis expiries do), over a
// control pipe (file descriptor 3 in the supervisor). A status pipe (file
// descriptor 4) carries the child's pid, start errors and "the deadline
// fired" back. Three mechanisms stop the child when baton goes away: the
// control pipe reaching EOF, a parent-death signal (SIGTERM) on the
// supervisor, and a parent-death signal (SIGKILL) on the child should the
// supervisor itself die. The first two end the whole process group, so
// grandchildren die too; the last reaches only the child.
//
// Parent-death signals belong to the OS thread that forked, not to the
// process, so both sides fork from a goroutine locked to its thread
// (runtime.LockOSThread) that stays locked until the forked process exits:
// every running supervisor holds one OS thread of baton.
//
// The supervisor exits with the child's exit code, 128+n if the child died
// of signal n, ExitDeadline (254, after one line on stderr) if it signalled
// the child because the deadline passed, and ExitFailure (255) if it could
// not do its job. After the child exits the supervisor SIGKILLs whatever is
// left in the child's process group, so background processes the job left
// behind do not outlive it either.
//
// A process can leave its group and session with setsid(), and a double
// fork orphans it; neither lets it escape. The supervisor is a child
// subreaper (PR_SET_CHILD_SUBREAPER), so orphans are reparented to it
// rather than to init, and every signal that ends a run (the deadline's
// SIGTERM and SIGKILL, a stop, the final sweep) goes to each descendant
// found in /proc as well as to the child's group: through a pidfd checked
// against the process's start time, so a reused pid is never hit. The
// supervisor reaps what was reparented to it before it exits. Signals the
// parent forwards ('k', baton lock's SIGINT/SIGTERM/... relay) go to the
// child's group only, and never after the child has been reaped: the child
// is waited for with WNOWAIT, so its pid, the group's id, cannot be reused
// before the supervisor stops signalling it.
//
// A job can also kill its supervisor (SIGKILL is not caught), and with it
// the supervisor's subreaping: its child dies of its parent-death signal,
// and the processes below are orphaned. So the process that starts
// supervisors becomes a child subreaper too (the first Start does it), and
// the orphans come to it rather than to init. Every run's child carries
// TreeEnv (BATON_TREE), a random value of its own, in its environment, and
// everything the job starts inherits it. Once a supervisor has exited,
// Start's waiter sweeps (orphans_linux.go): every child of this process
// whose environment holds the run's mark is stopped, killed with its
// subtree, and reaped, before Wait returns. Unrelated children of the
// process (other runs' supervisors, an exec.Cmd of the program) carry no
// such mark and are never touched; and this process reaps only through
// pidfds of processes it knows to be the run's (the child the supervisor
// reported with its start time, what killTree or the sweep signalled), so
// no exec.Cmd.Wait loses an exit status. A process that cleared its
// environment (env -i) and whose parent died before the sweep looked is
// not recognized by its mark.
//
// A run with Spec.Cgroups has a cgroup v2 of its own (internal/runcgroup),
// which recognizes it anyway: the supervisor starts the child directly in
// it (clone3 into the cgroup), its SIGKILLs (the deadline's, a stop's, the
// final sweep) also kill every process in it, and once the supervisor has
// exited Start's waiter freezes it, keeps a pidfd of each process in it
// (to reap those reparented here), kills them all, sweeps the marked ones
// as above, waits until the cgroup is empty and removes it, before Wait
// returns.
//
// Kill, the last resort for a supervisor that does not answer, stops the
// supervisor first (it starts nothing more), then stops and kills its
// descendants, then the supervisor; a Start that fails before the
// supervisor reported the child's pid (a supervisor stopped or stuck) does
// the same at once.
//
// The package works on Linux only; elsewhere Start returns an error wrapping
// errors.ErrUnsupported.
package supervisor
