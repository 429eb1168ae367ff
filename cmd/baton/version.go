package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version overrides the version reported by "baton version" when set at link
// time: go build -ldflags "-X main.version=v1.2.3" ./cmd/baton
var version string

// versionString returns "baton <version> (<go version>)". The version is, in
// order: the link-time main.version, the main module's version from the build
// info (set by "go install module@version" and by VCS stamping), else "dev".
func versionString() string {
	return fmt.Sprintf("baton %s (%s)", shortVersion(), runtime.Version())
}

// shortVersion is the version alone, as replicas publish it in the roster.
func shortVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const versionHelp = `usage: baton version

Prints the baton version, the commit it was built from and the Go version it
was built with.
`

// runVersion implements "baton version": it takes no arguments.
func runVersion(_ *flagSet, _ struct{}, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "baton version: unexpected argument %q\nusage: baton version\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, versionString())
	return 0
}
