package locking

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
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
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/mark.lua
	markSrc string
	//go:embed lua/elect_info.lua
	electInfoSrc string
	//go:embed lua/observe.lua
	observeSrc string
)

// scripts holds the loaded scripts of one Client; go-redis caches each hash.
type scripts struct {
	acquire, extend, release, leave, fenceSync, raise, mark *redis.Script
}

func newScripts() *scripts {
	return &scripts{
		acquire:   redis.NewScript(acquireSrc),
		extend:    redis.NewScript(extendSrc),
		release:   redis.NewScript(releaseSrc),
		leave:     redis.NewScript(leaveSrc),
		fenceSync: redis.NewScript(fenceSyncSrc),
		raise:     redis.NewScript(raiseSrc),
		mark:      redis.NewScript(markSrc),
	}
}

// keys of one lock; all share the hash tag {name}. The waiter set and the
// fair queue are named from the lock key inside the scripts (lock+":w",
// ":q", ":qd"), which keeps the hot path's arguments few.
type keys struct {
	name, lock, fence string
}

func (c *Client) keysFor(name string) keys {
	base := c.opts.prefix + "{" + name + "}"
	return keys{name: name, lock: base, fence: base + ":fence"}
}

func (c *Client) markerKey() string   { return c.opts.prefix + "marker" }
func (c *Client) wakeChannel() string { return c.opts.prefix + "wake" }
