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

// scripts holds the loaded scripts of one Client.
type scripts struct {
	acquire, extend, release, leave, fenceSync, raise, mark *script
}

func newScripts() *scripts {
	return &scripts{
		acquire:   newScript(acquireSrc),
		extend:    newScript(extendSrc),
		release:   newScript(releaseSrc),
		leave:     newScript(leaveSrc),
		fenceSync: newScript(fenceSyncSrc),
		raise:     newScript(raiseSrc),
		mark:      newScript(markSrc),
	}
}

// script is a Lua script with what its command lines need made once: the hot
// paths build "EVALSHA sha numkeys keys... args..." themselves, in one slice,
// rather than through redis.Script, which copies keys and args into a new one.
type script struct {
	*redis.Script
	src string
	sha any // the hash, boxed once
}

func newScript(src string) *script {
	s := redis.NewScript(src)
	return &script{Script: s, src: src, sha: s.Hash()}
}

// line returns the EVALSHA command line for keys and args.
func (s *script) line(keys []string, args ...any) []any {
	l := make([]any, 0, 3+len(keys)+len(args))
	l = append(l, "evalsha", s.sha, len(keys))
	for _, k := range keys {
		l = append(l, k)
	}
	return append(l, args...)
}

// evalLine is line with the script's source instead of its hash, for a server
// that answered NOSCRIPT (restart, SCRIPT FLUSH): EVAL also caches it there.
func (s *script) evalLine(line []any) []any {
	l := make([]any, len(line))
	copy(l, line)
	l[0], l[1] = "eval", s.src
	return l
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

func (c *Client) markerKey() string   { return c.marker }
func (c *Client) wakeChannel() string { return c.wake }
