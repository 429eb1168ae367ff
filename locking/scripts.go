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
	//go:embed lua/rw_acquire.lua
	rwAcquireSrc string
	//go:embed lua/sem_acquire.lua
	semAcquireSrc string
	//go:embed lua/extend_share.lua
	extendShareSrc string
	//go:embed lua/release_share.lua
	releaseShareSrc string
)

// scripts holds the scripts of one Client. The acquire scripts carry the
// quorum prelude (q_guard, q_fence: see internal/quorum/lua/prelude.lua), as
// do release and fenceSync for its counter check (q_count).
type scripts struct {
	acquire, extend, release, leave, fenceSync       *quorum.Script
	rwAcquire, semAcquire, extendShare, releaseShare *quorum.Script
}

func newScripts() *scripts {
	return &scripts{
		acquire:      quorum.NewGuardedScript(acquireSrc),
		extend:       quorum.NewScript(extendSrc),
		release:      quorum.NewGuardedScript(releaseSrc),
		leave:        quorum.NewScript(leaveSrc),
		fenceSync:    quorum.NewGuardedScript(fenceSyncSrc),
		rwAcquire:    quorum.NewGuardedScript(rwAcquireSrc),
		semAcquire:   quorum.NewGuardedScript(semAcquireSrc),
		extendShare:  quorum.NewScript(extendShareSrc),
		releaseShare: quorum.NewScript(releaseShareSrc),
	}
}

// kind is what a lease holds. Every kind is the same Lease (token, fence,
// validity deadline, auto-extension, Done, token-checked release); the kind
// picks the scripts that take, extend and release it.
type kind uint8

const (
	kindLock  kind = iota // a mutex: the lock key holds the token
	kindWrite             // a read/write lock's writer: the key holds the token; its release wakes every waiter
	kindRead              // a read/write lock's reader: an entry of the key's share set (lock+":r")
	kindSlot              // a fair semaphore's holder: an entry of the key's share set
)

// share tells the kinds held as an entry of the share set.
func (k kind) share() bool { return k >= kindRead }

func (c *Client) wakeChannel() string { return c.wake }
