package supervisor

import "syscall"

const supported = true

// supervisorAttr puts the supervisor in a process group of its own (a
// signal to baton's group, ^C or ^Z on a terminal, does not reach it; baton
// decides what its runs do) and has the kernel send it SIGTERM when the
// thread that started it ends.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
