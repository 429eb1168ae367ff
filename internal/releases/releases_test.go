package releases

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func changelog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every release CHANGELOG.md has a heading for is in releases.txt, in the
// same order, and nothing else is.
func TestReleasesMatchChangelog(t *testing.T) {
	if _, err := parse(releasesTxt); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range All() {
		listed = append(listed, r.Version)
	}
	headings := ChangelogReleases(changelog(t))
	slices.Reverse(headings) // oldest first, as releases.txt
	if !slices.Equal(listed, headings) {
		t.Errorf("releases.txt lists %v, CHANGELOG.md's headings name %v", listed, headings)
	}
}

// The Unreleased section says which release it rolls from, and that is the
// latest release.
func TestRollsFromTheLatestRelease(t *testing.T) {
	from, err := RollsFrom(changelog(t))
	if err != nil {
		t.Fatal(err)
	}
	all := All()
	if last := all[len(all)-1].Version; from != last {
		t.Errorf("CHANGELOG.md's Unreleased section rolls from %s; the latest release is %s", from, last)
	}
}

// Each release's commit is in this branch's history, when the history is
// here (a shallow clone has not got it: the upgrade test says so).
func TestReleaseCommitsAreInHistory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git command")
	}
	if err := exec.Command("git", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not in a git repository (a source archive): no history to check")
	}
	out, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
	shallow := strings.TrimSpace(string(out)) == "true"
	for _, r := range All() {
		if err := exec.Command("git", "cat-file", "-e", r.Commit+"^{commit}").Run(); err != nil {
			if shallow {
				t.Skipf("%s's commit %s is not in this shallow clone (git fetch --unshallow)", r.Version, r.Commit)
			}
			t.Errorf("%s's commit %s is not in the repository", r.Version, r.Commit)
			continue
		}
		if err := exec.Command("git", "merge-base", "--is-ancestor", r.Commit, "HEAD").Run(); err != nil {
			t.Errorf("%s's commit %s is not an ancestor of HEAD: %v", r.Version, r.Commit, err)
		}
	}
}

func TestParseRefusesBadLines(t *testing.T) {
	for _, s := range []string{"0.1 61aca20573501dbbc974f632a279c5b27076a68a", "0.1.0 61aca20", "0.1.0"} {
		if _, err := parse(s); err == nil {
			t.Errorf("parse(%q) accepted it", s)
		}
	}
}
