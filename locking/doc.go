// Package locking is baton's Redis lock library: leases on one Redis master or
// on a quorum of independent masters (Redlock), with fencing tokens,
// auto-extension, lost-lock signals and waiters that are woken rather than
// polling.
//
// A Lease is a value: the random token that proves ownership, a fencing token
// that strictly increases across successive holders of the same lock, a
// validity deadline, and a Done channel and Context that end when the lease is
// released or lost (Err says why). The lease ends at its validity deadline at
// the latest, which is earlier than the moment the key expires in Redis, so a
// holder always learns it lost the lock before anyone else can take it.
// Auto-extension pushes the deadline out every ttl/3 while a quorum of masters
// confirms the key is still this lease's; it never re-creates a key that has
// gone.
//
// Release and extension compare the holder's token inside one atomic script;
// nothing in this package deletes a lock with a plain DEL. Every script reads
// the server's clock itself: no client clock decides another client's expiry.
//
// Operating requirements: maxmemory-policy noeviction on every master
// (eviction deletes locks and counters); clocks slewed, never stepped; with
// several masters, a master that restarted empty stays out of quorums until
// repaired and quarantined (done automatically, see WithRestartQuarantine);
// Sentinel or Cluster failover can lose a lock, so correctness-critical users
// configure independent masters.
//
// # Exported names
//
// Clients: [New] (one master) and [NewQuorum] make a [Client], with the
// [Option] values [WithPrefix], [WithLogger], [WithMasterTimeout],
// [WithLateness], [WithRestartQuarantine], [WithFreshDeployment] and
// [WithRefuseEviction]; [MinTTL] is the shortest ttl. [Stats] counts what
// its locks did; [MasterStatus] tells how each master stands (a
// [MasterState]; [WhyNoMarker], [WhyOtherProcess]) and [HeldLock] each
// lock held now.
//
// Leases: a [Lease] on one lock, taken with the [LockOption] values
// [WithAutoExtend], [WithMaxHold], [WithMaxExtensions] and [WithFair]; a
// [MultiLease] on several; an [RWMutex]; a [Semaphore]; a value computed
// once into a [Cache] under a lock ([FillOption] [WithFillLockTTL],
// [FillLockTTL]). An [Election] gives a candidate a [Term] and tells who
// leads ([Leader]).
//
// Errors: [ErrNotObtained], [ErrUnavailable], [ErrNotHeld], [ErrLost],
// [ErrReleased], [ErrHoldLimit], [ErrClosed], [ErrInvalid], [ErrEviction],
// [ErrCorrupt], [ErrQuarantine] and [ErrMarked]; an [ObtainError] names
// each master's part ([MasterError]), a [CorruptError] a corrupt counter.
package locking
