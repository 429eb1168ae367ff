package main

import (
	"io"
	"slices"
	"testing"
)

// A KEY that starts with "-" is given after a first "--", which ends the
// flags: baton lock [flags] -- KEY -- CMD, as it always could be.
func TestLockKeyStartingWithDashAfterDoubleDash(t *testing.T) {
	cfg, help, err := parseLock([]string{"--redis", "redis://127.0.0.1:1/0", "--ttl", "7s", "--", "-nightly", "--", "echo", "--ttl", "1s"}, io.Discard)
	if help || err != nil {
		t.Fatalf("help %v, err %v", help, err)
	}
	if cfg.key != "-nightly" || cfg.ttl.String() != "7s" || !slices.Equal(cfg.argv, []string{"echo", "--ttl", "1s"}) {
		t.Fatalf("key %q ttl %v argv %q", cfg.key, cfg.ttl, cfg.argv)
	}
}
