package main

// Review of the restructuring (7b41a71..HEAD): one redaction
// (internal/redact.URL) replaced cmd/baton's redactURL, which masked the
// user info of every URL that url.Parse could not read.

import (
	"io"
	"strings"
	"testing"
)

// A Redis URL that does not parse (here the scheme was left out, as in
// ":password@host:port") is named in baton lock's usage error without its
// password. At 7b41a71 redactURL printed it as "xxxxx@host:6379".
func TestLockUnparsableURLPasswordMasked(t *testing.T) {
	const pw = "hunter2-s3cret"
	_, _, err := parseLock([]string{"--redis", ":" + pw + "@127.0.0.1:6379", "key", "--", "true"}, io.Discard)
	if err == nil {
		t.Fatal("an unparsable URL accepted")
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("usage error shows the password: %v", err)
	}
}
