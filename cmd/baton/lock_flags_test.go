package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// A KEY that starts with "-" is given after a first "--", which ends the
// flags: baton lock [flags] -- KEY -- CMD, as it always could be.
func TestLockKeyStartingWithDashAfterDoubleDash(t *testing.T) {
	t.Parallel()
	cfg, help, err := parseLock([]string{"--redis", "redis://127.0.0.1:1/0", "--ttl", "7s", "--", "-nightly", "--", "echo", "--ttl", "1s"}, io.Discard)
	if help || err != nil {
		t.Fatalf("help %v, err %v", help, err)
	}
	if cfg.key != "-nightly" || cfg.ttl.String() != "7s" || !slices.Equal(cfg.argv, []string{"echo", "--ttl", "1s"}) {
		t.Fatalf("key %q ttl %v argv %q", cfg.key, cfg.ttl, cfg.argv)
	}
}

// baton help lock says that brand-new masters make baton lock exit 69 for
// their quarantine and how to skip it (baton init --redis URL), and calls
// --fresh-deployment deprecated, naming the step that replaces it.
func TestLockHelpSaysHowBrandNewMastersSkipTheQuarantine(t *testing.T) {
	t.Parallel()
	code, out, errs := runIn("help", "lock")
	if code != 0 {
		t.Fatalf("baton help lock: exit %d: %s", code, errs)
	}
	for _, want := range []string{"exits 69 meanwhile", "baton init --redis URL (the same URLs", "deprecated (use baton init --redis URL once)"} {
		if !strings.Contains(out, want) {
			t.Errorf("baton help lock does not say %q:\n%s", want, out)
		}
	}
}

// A Redis URL that does not parse (here the scheme was left out, as in
// ":password@host:port") is named in baton lock's usage error without its
// password (internal/redact.URL masks the user info of a URL that
// url.Parse cannot read).
func TestLockUnparsableURLPasswordMasked(t *testing.T) {
	t.Parallel()
	const pw = "hunter2-s3cret"
	_, _, err := parseLock([]string{"--redis", ":" + pw + "@127.0.0.1:6379", "key", "--", "true"}, io.Discard)
	if err == nil {
		t.Fatal("an unparsable URL accepted")
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("usage error shows the password: %v", err)
	}
}
