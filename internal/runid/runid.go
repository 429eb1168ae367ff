// Package runid makes run ids: the one format every run of baton carries
// (BATON_RUN_ID, X-Baton-Run-Id, log lines, history), whether a scheduler
// dispatched it or a singleton started it.
package runid

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// New returns a fresh run id: 32 lowercase hex digits of 128 random bits.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Replica is the replica id runs carry (BATON_REPLICA, Run.Replica) in a
// process that names none: "<hostname>-<pid>".
func Replica() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
