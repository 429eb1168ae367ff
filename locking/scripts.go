package locking

import (
	_ "embed"

	"github.com/batonhq/baton/internal/quorum"
)

// Every script runs by hash (EVALSHA) and is sent whole only when the server
// answers NOSCRIPT, e.g. after a restart or SCRIPT FLUSH. The KEYS and ARGV
// contract of each is written at the top of its file.
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/leave.lua
	leaveSrc string
	//go:embed lua/fence_sync.lua
	fenceSyncSrc string
	//go:embed lua/elect_info.lua
	electInfoSrc string
	//go:embed lua/observe.lua
	observeSrc string
)

// scripts holds the scripts of one Client. acquire carries the quorum
// prelude (q_guard, q_fence: see internal/quorum/lua/prelude.lua).
type scripts struct {
	acquire, extend, release, leave, fenceSync *quorum.Script
}

func newScripts() *scripts {
	return &scripts{
		acquire:   quorum.NewGuardedScript(acquireSrc),
		extend:    quorum.NewScript(extendSrc),
		release:   quorum.NewScript(releaseSrc),
		leave:     quorum.NewScript(leaveSrc),
		fenceSync: quorum.NewScript(fenceSyncSrc),
	}
}

// keys of one lock; all share the hash tag {name}. The waiter set and the
// fair queue are named from the lock key inside the scripts (lock+":w",
// ":q", ":qd"), which keeps the hot path's arguments few.
type keys struct {
	name, lock, fence string
}

// fenceSuffix names a lock's fencing counter from its lock key.
const fenceSuffix = ":fence"

func (c *Client) keysFor(name string) keys {
	fence := c.opts.prefix + "{" + name + "}" + fenceSuffix // one allocation for both
	return keys{name: name, lock: fence[:len(fence)-len(fenceSuffix)], fence: fence}
}

func (c *Client) wakeChannel() string { return c.wake }
