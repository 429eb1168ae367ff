// Package runcgroup gives every exec run a cgroup v2 of its own, so that
// everything the run started is found and killed when the run ends: a
// process that left the run's process group and session (setsid), was
// orphaned, renamed itself or cleared its environment is still in the
// run's cgroup, because only a write to a cgroup.procs file moves a process
// out of it.
//
// A Root is the directory the runs' cgroups are made in: by default
// (Open("")) the cgroup this process runs in, found on the cgroup2 mount
// in /proc/self/mountinfo through the "0::" line of /proc/self/cgroup.
// This process does not move: its own cgroup holds it, so the kernel lets
// no controller be enabled for that cgroup's children ("no internal
// processes"), and child cgroups without controllers are what a run needs.
// Under systemd the cgroup is the unit's, which a service may write below
// only with Delegate=yes.
//
// A run's cgroup is named baton-<pidns>-<pid>-<start>-<random>-<job>: the
// pid namespace, pid and start time (clock ticks after boot) of the
// process that made it (Owner), so that a later process (the next start
// after a crash) tells the cgroups of a process that is gone from those of
// a live one sharing the directory (another replica, a test binary next to
// it). RemoveLeftovers kills and removes the former; it leaves alone those
// made in another pid namespace, whose makers it cannot see.
//
// The supervisor starts a run's child directly in its cgroup
// (SysProcAttr.UseCgroupFD: clone3 with CLONE_INTO_CGROUP), so the child
// cannot fork before it is inside. Kill ends every process in a cgroup and
// its descendants: through cgroup.kill where the kernel has it (5.14),
// otherwise by freezing the cgroup, SIGKILLing each process listed, and
// thawing it. Remove kills, waits until the cgroup is empty, and removes
// it.
//
// The package works on Linux only; elsewhere Open returns an error wrapping
// ErrUnavailable.
package runcgroup
