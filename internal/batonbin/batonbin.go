// Package batonbin builds the baton binary for tests that run it as a
// process (cmd/baton's and internal/e2e's). A test binary builds what it
// needs once, in TestMain, into a temporary directory it removes when its
// tests are done:
//
//	dir, err := os.MkdirTemp("", "baton-e2e-")
//	...
//	binary, err = batonbin.Build(dir)
//	...
//	code := m.Run()
//	os.RemoveAll(dir)
package batonbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Package is the import path of the command Build compiles.
const Package = "github.com/batonhq/baton/cmd/baton"

// Build compiles the baton command into dir with the given build tags and
// returns the binary's path: dir/baton without tags (the binary as a
// release is built), else dir/baton-TAG1-TAG2 (baton dev's embedded Redis
// needs the "dev" tag). It runs the go command found on $PATH, which go
// test puts first there, else $GOROOT/bin/go. The error carries the go
// command's output.
func Build(dir string, tags ...string) (string, error) {
	gobin := goCommand()
	path := filepath.Join(dir, strings.Join(append([]string{"baton"}, tags...), "-"))
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, Package)
	if out, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("batonbin: go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return path, nil
}

// BuildTree compiles the baton command of the source tree src (another
// release's, extracted from the repository's history, with its own go.mod)
// into the binary out. It builds as Build does (no -trimpath), so that the
// dependencies both releases share come from the go command's cache. The
// error carries the go command's output.
func BuildTree(src, out string) error {
	cmd := exec.Command(goCommand(), "build", "-o", out, "./cmd/baton")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("batonbin: go build in %s: %w\n%s", src, err, b)
	}
	return nil
}

// goCommand is the go command found on $PATH, which go test puts first
// there, else $GOROOT/bin/go.
func goCommand() string {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	return gobin
}
