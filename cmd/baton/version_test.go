package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !regexp.MustCompile(`^baton \S+ \(commit \S+.*; go[0-9.]+.*\)\n$`).MatchString(out.String()) {
		t.Fatalf("version output %q", out.String())
	}
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	out.Reset()
	run([]string{"version"}, &out, &errb)
	if !strings.HasPrefix(out.String(), "baton v1.2.3 (commit ") {
		t.Fatalf("version with -X override: %q", out.String())
	}
}

// The version line names the commit, when it was made and whether the
// work tree had changes, from the build info's VCS stamp.
func TestVersionNamesTheCommit(t *testing.T) {
	t.Parallel()
	rev := "5d79056c1e9f44b0e1a40c2b1f6a8f3d7e2c9a11"
	stamp := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{stamp("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-28T11:50:00Z", "vcs.modified", "false"),
			"baton v1.2.0 (commit " + rev + ", 2026-11-28T11:50:00Z; go1.26.0)"},
		{stamp("vcs.revision", rev, "vcs.modified", "true"), "baton v1.2.0 (commit " + rev + ", modified; go1.26.0)"},
		{stamp("-buildmode", "exe"), "baton v1.2.0 (commit unknown; go1.26.0)"},
		{nil, "baton v1.2.0 (commit unknown; go1.26.0)"},
	} {
		if got := formatVersion("v1.2.0", tc.bi, "go1.26.0"); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// A binary built from a git checkout with VCS stamping prints the checkout's
// commit.
func TestVersionOfABuildFromGit(t *testing.T) {
	t.Parallel() // a second build of the binary: it overlaps the other tests
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree (.git is a file): go build stamps only a checkout whose .git is a directory")
	}
	bin := filepath.Join(t.TempDir(), "baton")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "(commit " + strings.TrimSpace(string(head)) + ", "
	if !strings.Contains(string(out), want) {
		t.Fatalf("baton version: %q; want %q", out, want)
	}
}
