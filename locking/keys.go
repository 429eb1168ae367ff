package locking

import (
	"strconv"
	"strings"
)

// The Redis names of a client with prefix PREFIX (WithPrefix), on every
// master:
//
//	PREFIX{NAME}            the lock NAME: its holder's token (a mutex, a
//	                        writer), or nothing of its own (a shared lock)
//	PREFIX{NAME}:fence      its fencing counter
//	PREFIX{NAME}:r          its share set (readers, fair-semaphore holders)
//	PREFIX{NAME}:w, :q, :qd its waiter set, fair queue and queue data
//	PREFIX{NAME}:wi         its waiting writers' intents
//	PREFIX{NAME}:leader     an election's leader record
//	PREFIXmarker            the master's marker (internal/quorum)
//	PREFIXwake              the wake-up channel (pub/sub)
//
// The companions of a lock key other than its fence, shares and leader
// record are named from it inside the scripts (lua/*.lua), which keeps the
// hot path's arguments few. The lock names of the types built on locks
// (electionLock, rwLock, fairSemLock, Semaphore.slot, fillLock) are here
// too.

// keys of one lock; all share the hash tag {name}.
type keys struct {
	name, lock, fence string
	kind              kind
	limit             int // a fair semaphore's limit
}

// fenceSuffix names a lock's fencing counter from its lock key.
const fenceSuffix = ":fence"

// sharesSuffix names a shared lock's share set from its lock key.
const sharesSuffix = ":r"

func (c *Client) keysFor(name string) keys {
	fence := c.opts.prefix + "{" + name + "}" + fenceSuffix // one allocation for both
	return keys{name: name, lock: fence[:len(fence)-len(fenceSuffix)], fence: fence}
}

// lockKey is the key of the lock name under prefix.
func lockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// fenceKey is the fencing counter of the lock name under prefix.
func fenceKey(prefix, name string) string { return lockKey(prefix, name) + fenceSuffix }

// sharesKey is the share set of the shared lock name under prefix.
func sharesKey(prefix, name string) string { return lockKey(prefix, name) + sharesSuffix }

// heldPatterns match, under a prefix, the lock keys and the share sets
// (and no other companion of a lock key).
var heldPatterns = []string{"{*}", "{*}" + sharesSuffix}

// heldName parses a key matched by heldPatterns under prefix: the lock's
// name, and whether the key is its share set.
func heldName(prefix, key string) (name string, shared, ok bool) {
	name, ok = strings.CutPrefix(key, prefix+"{")
	switch {
	case ok && strings.HasSuffix(name, "}"):
		return strings.TrimSuffix(name, "}"), false, true
	case ok && strings.HasSuffix(name, "}"+sharesSuffix):
		return strings.TrimSuffix(name, "}"+sharesSuffix), true, true
	}
	return "", false, false
}

// markerKey is the marker key every master carries (see internal/quorum).
func markerKey(prefix string) string { return prefix + "marker" }

// wakeChannelOf is the pub/sub channel the scripts announce releases on.
func wakeChannelOf(prefix string) string { return prefix + "wake" }

// electionLock is the lock of the election name.
func electionLock(name string) string { return "election:" + name }

// leaderKey is the election's leader record, beside its lock key.
func (e *Election) leaderKey() string { return e.keys.lock + ":leader" }

// rwLock is the lock of the read/write lock name.
func rwLock(name string) string { return "rw:" + name }

// fairSemLock is the lock of the fair semaphore name.
func fairSemLock(name string) string { return "fsem:" + name }

// slot is the lock of the (unfair) semaphore's slot i.
func (s *Semaphore) slot(i int) string { return "sem:" + s.name + "#" + strconv.Itoa(i) }

// fillLock is the lock Fill takes to compute the value of cache key.
func fillLock(key string) string { return "fill:" + key }
