package runcgroup

import (
	"errors"
	"time"
)

// Off, given to Open by a caller's configuration, is not a directory but
// the choice of no cgroups; Open refuses it like a directory it cannot use.
const Off = "off"

// ErrUnavailable marks an Open that found no cgroup v2 directory it can make
// the runs' cgroups in (not mounted, not writable, a kernel too old, or
// Off); its message says why.
var ErrUnavailable = errors.New("runcgroup: no cgroup v2 to put runs in")

// RemoveTimeout is how long Remove waits, by default, for the processes of a
// killed cgroup to exit before it gives up on removing it.
const RemoveTimeout = 5 * time.Second

// Leftover is a cgroup that RemoveLeftovers found and removed.
type Leftover struct {
	// Dir is the cgroup's directory.
	Dir string
	// Killed is how many processes were still in it.
	Killed int
}
