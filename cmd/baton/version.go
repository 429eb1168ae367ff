package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version overrides the version reported by "baton version" when set at link
// time: go build -ldflags "-X main.version=v1.2.3" ./cmd/baton
var version string

const versionHelp = `usage: baton version

Prints the baton version (the module version, or the one set at link time),
the commit it was built from (with "modified" when the work tree had
changes) and when, and the Go version it was built with, e.g.

  baton v1.2.0 (commit 5d79056c1e9f44b0e1a40c2b1f6a8f3d7e2c9a11, 2026-11-28T11:50:00Z; go1.26.0)

"commit unknown" means the binary was built without version control
information (go build -buildvcs=false, or outside a git checkout).
`

// versionString returns "baton VERSION (commit REV[, TIME][, modified]; GO)"
// for this binary.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(shortVersion(), bi, runtime.Version())
}

// formatVersion writes the version line from the build info bi (nil:
// none).
func formatVersion(v string, bi *debug.BuildInfo, goVersion string) string {
	var rev, when string
	modified := false
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	commit := []string{"commit unknown"}
	if rev != "" {
		commit = []string{"commit " + rev}
		if when != "" {
			commit = append(commit, when)
		}
		if modified {
			commit = append(commit, "modified")
		}
	}
	return fmt.Sprintf("baton %s (%s; %s)", v, strings.Join(commit, ", "), goVersion)
}

// shortVersion is the version alone, as replicas publish it in the roster.
// It is, in order: the link-time main.version, the main module's version
// from the build info (set by "go install module@version" and by VCS
// stamping), else "dev".
func shortVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// runVersion implements "baton version": it takes no arguments.
func runVersion(_ *flagSet, _ struct{}, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "baton version: unexpected argument %q\nusage: baton version\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, versionString())
	return 0
}
