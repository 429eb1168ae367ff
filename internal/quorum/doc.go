// Package quorum is the one place where baton talks to its lock masters:
// script calls batched into pipelines per master, fanned out over every
// master, and the check that keeps a restarted master out of every quorum.
// The lock library (package locking) and the scheduler's tick claims are both
// built on it, so restart handling, NOSCRIPT recovery and the tally of answers
// exist once.
//
// Restart detection. Every master carries a marker key whose value names the
// server process it was written under (INFO server run_id, new at every start)
// and a fence floor. A call reaches a master only when a check has found its
// marker naming the running process: a master restarted empty has no marker,
// one restarted from an RDB/AOF snapshot has the marker of an earlier process;
// both are repaired (marked anew, with a fence floor read from the masters'
// clocks) and then wait out a quarantine on the server's own clock, from the
// moment they may have lost writes.
//
// A restart always breaks the client's connections, so the check runs once
// per new connection rather than in every script: a hook counts the
// connections each go-redis client dials, a call is admitted only while no
// connection was dialed since the last check, and an answer that arrived
// after a new dial is trusted only once INFO confirms the same process still
// runs. The scripts that grant (acquire, tick claim) also read the marker, so
// a master flushed while it runs grants nothing either.
package quorum
