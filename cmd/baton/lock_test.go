package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// The lock library's warnings (it logs through slog) reach baton lock's
// stderr as "baton lock: ..." lines; its Info reports do not.
func TestLockLibraryWarningsOnStderr(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:warn", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "baton lock: quorum: master 0 ("+srv.Addr()+"): maxmemory-policy is allkeys-lru") {
		t.Fatalf("stderr %q, want the eviction warning as a baton lock line", stderr)
	}
	if strings.Contains(stderr, "level=") || strings.Contains(stderr, "either way a restart is detected") {
		t.Fatalf("stderr %q: a structured line or an Info report", stderr)
	}
}
