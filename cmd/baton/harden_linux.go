package main

import "golang.org/x/sys/unix"

// harden makes this process not dumpable: its /proc entries (environ, mem,
// fd) belong to root, so a job running as baton's user cannot read baton's
// environment (a Redis password, a signing key) through
// /proc/<baton>/environ, nor ptrace it. It also turns off core dumps of
// baton, which would hold the same secrets. The commands baton runs are
// dumpable again (execve resets it for them).
func harden() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
