//go:build !linux

package main

import "syscall"

// childSysProcAttr puts CMD in its own process group, so that forwarded
// signals and the kill after a lost lock reach its children too. Outside
// Linux there is no parent-death signal: if baton is killed with SIGKILL,
// CMD keeps running without the lock.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
