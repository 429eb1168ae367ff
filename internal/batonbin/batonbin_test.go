package batonbin_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batonbin"
)

// Build makes a binary that runs, named after its tags.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	bin, err := batonbin.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bin != filepath.Join(dir, "baton") {
		t.Errorf("binary at %s, want %s", bin, filepath.Join(dir, "baton"))
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "baton ") {
		t.Fatalf("baton version: %v, %q", err, out)
	}
}

// A failed build says which command failed and why.
func TestBuildError(t *testing.T) {
	_, err := batonbin.Build(t.TempDir(), "dev", "no such tag")
	if err == nil || !strings.Contains(err.Error(), "batonbin: go build") {
		t.Fatalf("Build with a malformed tag = %v, want the go command's error", err)
	}
}
