package main

import "syscall"

// childSysProcAttr puts CMD in its own process group, so that forwarded
// signals and the kill after a lost lock reach its children too, and has the
// kernel SIGKILL it if baton dies (the parent-death signal is tied to the
// thread that started the child; see supervise).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
