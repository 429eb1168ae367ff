// Package releases lists baton's releases and the commit each was cut from
// (releases.txt), so that a test can build an earlier release from the
// repository's history and run it beside this one (internal/e2e's upgrade
// test), and reads the CHANGELOG's claim of which release this one rolls
// from.
package releases

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed releases.txt
var releasesTxt string

// Release is one release of baton.
type Release struct {
	// Version is its semantic version, as CHANGELOG.md's heading names it
	// ("0.1.0").
	Version string
	// Commit is the full hash of the commit it was cut from.
	Commit string
}

// All returns every release, oldest first.
func All() []Release {
	rs, err := parse(releasesTxt)
	if err != nil {
		panic(err) // releases.txt is embedded: its test parses it
	}
	return rs
}

// Find returns the release of version v.
func Find(v string) (Release, bool) {
	for _, r := range All() {
		if r.Version == v {
			return r, true
		}
	}
	return Release{}, false
}

var (
	versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// parse reads releases.txt: "VERSION COMMIT" a line; # starts a comment
// line.
func parse(s string) ([]Release, error) {
	var out []Release
	for i, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 || !versionRE.MatchString(f[0]) || !commitRE.MatchString(f[1]) {
			return nil, fmt.Errorf("releases: releases.txt:%d: %q is not \"VERSION COMMIT\" (a full commit hash)", i+1, l)
		}
		out = append(out, Release{Version: f[0], Commit: f[1]})
	}
	return out, nil
}

var (
	headingRE   = regexp.MustCompile(`(?m)^## \[([^\]]+)\]`)
	rollsFromRE = regexp.MustCompile(`(?m)^Rolls from ([0-9]+\.[0-9]+\.[0-9]+)\b`)
)

// ChangelogReleases returns the versions CHANGELOG.md's "## [VERSION] -
// DATE" headings name, newest first ("Unreleased" left out).
func ChangelogReleases(changelog string) []string {
	var out []string
	for _, m := range headingRE.FindAllStringSubmatch(changelog, -1) {
		if m[1] != "Unreleased" {
			out = append(out, m[1])
		}
	}
	return out
}

// RollsFrom returns the release the "Rolls from VERSION" line of
// CHANGELOG.md's Unreleased section names: the release whose replicas this
// one runs beside during a rolling upgrade.
func RollsFrom(changelog string) (string, error) {
	_, rest, ok := strings.Cut(changelog, "## [Unreleased]")
	if !ok {
		return "", fmt.Errorf("releases: CHANGELOG.md has no \"## [Unreleased]\" section")
	}
	if i := strings.Index(rest, "\n## ["); i >= 0 {
		rest = rest[:i]
	}
	m := rollsFromRE.FindStringSubmatch(rest)
	if m == nil {
		return "", fmt.Errorf("releases: CHANGELOG.md's Unreleased section has no \"Rolls from VERSION\" line")
	}
	return m[1], nil
}
