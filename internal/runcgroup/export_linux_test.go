package runcgroup

// WithoutCgroupKill makes Kill act as on a kernel without cgroup.kill
// (before 5.14) until the returned func is called.
func WithoutCgroupKill() (restore func()) {
	hasCgroupKill = func(string) bool { return false }
	return func() { hasCgroupKill = cgroupKillFile }
}
