package baton_test

// The public surface of each package a Go program imports is what its doc
// promises: the package doc's "# Exported names" section names, as doc
// links, every name `go doc -short` shows of it, and no name the package
// does not export. A name added without a word in the doc fails here, as a
// package missing from the README's Layout fails in readme_test.go. None
// of it needs Redis.

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/otlpenv"
	"github.com/batonhq/baton/scheduler"
)

// surfacePackages are the directories of the packages whose docs list
// their names: the root and the libraries a Go program imports with it.
var surfacePackages = []string{".", "locking", "config", "scheduler", "jobs", "otlpenv"}

// namesHeading starts the section of a package doc that names the
// package's exports; the section runs to the next heading or the end.
const namesHeading = "# Exported names"

func TestPackageDocsNameTheirExports(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, dir := range surfacePackages {
		t.Run(dir, func(t *testing.T) {
			pkg := "./" + dir
			if dir == "." {
				pkg = "."
			}
			required, exists := exportedNames(t, goBin, pkg)
			named := docSectionNames(t, dir)
			for _, name := range sortedKeys(required) {
				if !named[name] {
					t.Errorf("%s: `go doc -short` shows %s, which the package doc's %q section does not name: say what it is for there, as a doc link ([%s])", pkg, name, namesHeading, name)
				}
			}
			for _, name := range sortedKeys(named) {
				if !exists[name] {
					t.Errorf("%s: the package doc's %q section names [%s], which the package does not export", pkg, namesHeading, name)
				}
			}
		})
	}
}

// exportedErrors are the error values the surface packages export, by
// the name a program matches them by.
var exportedErrors = map[string]error{
	"baton.ErrBackfillWindow":        baton.ErrBackfillWindow,
	"baton.ErrBadPause":              baton.ErrBadPause,
	"baton.ErrBadQuery":              baton.ErrBadQuery,
	"baton.ErrCalendarInUse":         baton.ErrCalendarInUse,
	"baton.ErrLayoutMismatch":        baton.ErrLayoutMismatch,
	"baton.ErrNoCalendar":            baton.ErrNoCalendar,
	"baton.ErrNoRunner":              baton.ErrNoRunner,
	"baton.ErrNoSchedule":            baton.ErrNoSchedule,
	"baton.ErrNotTriggerable":        baton.ErrNotTriggerable,
	"baton.ErrScheduleChanged":       baton.ErrScheduleChanged,
	"baton.ErrSchedulesMoving":       baton.ErrSchedulesMoving,
	"baton.ErrTickWindow":            baton.ErrTickWindow,
	"baton.ErrUnknownJob":            baton.ErrUnknownJob,
	"jobs.ErrCorrupt":                jobs.ErrCorrupt,
	"locking.ErrClosed":              locking.ErrClosed,
	"locking.ErrCorrupt":             locking.ErrCorrupt,
	"locking.ErrEviction":            locking.ErrEviction,
	"locking.ErrHoldLimit":           locking.ErrHoldLimit,
	"locking.ErrInvalid":             locking.ErrInvalid,
	"locking.ErrLost":                locking.ErrLost,
	"locking.ErrMarked":              locking.ErrMarked,
	"locking.ErrNotHeld":             locking.ErrNotHeld,
	"locking.ErrNotObtained":         locking.ErrNotObtained,
	"locking.ErrQuarantine":          locking.ErrQuarantine,
	"locking.ErrReleased":            locking.ErrReleased,
	"locking.ErrUnavailable":         locking.ErrUnavailable,
	"otlpenv.ErrLeftOut":             otlpenv.ErrLeftOut,
	"scheduler.ErrAlreadyDispatched": scheduler.ErrAlreadyDispatched,
	"scheduler.ErrBackfillRunning":   scheduler.ErrBackfillRunning,
	"scheduler.ErrJobDone":           scheduler.ErrJobDone,
	"scheduler.ErrLeftToOthers":      scheduler.ErrLeftToOthers,
}

// Every error value a surface package exports begins with the name of
// that package, the one a program matches it by, also when an internal
// package makes it (baton.ErrNoSchedule is the runtime schedule store's):
// "baton: no such runtime schedule", never "no such runtime schedule" or
// another package's name. exportedErrors holds every Err name `go doc`
// shows, so a new one is checked too.
func TestExportedErrorsBeginWithTheirPackage(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	shown := map[string]bool{}
	for _, dir := range surfacePackages {
		pkg, name := "./"+dir, dir
		if dir == "." {
			pkg, name = ".", "baton"
		}
		_, exists := exportedNames(t, goBin, pkg)
		for n := range exists {
			if errName.MatchString(n) {
				shown[name+"."+n] = true
			}
		}
	}
	for _, name := range sortedKeys(shown) {
		if _, ok := exportedErrors[name]; !ok {
			t.Errorf("`go doc` shows %s, which exportedErrors does not hold: add it", name)
		}
	}
	for name, err := range exportedErrors {
		if !shown[name] {
			t.Errorf("exportedErrors holds %s, which `go doc` does not show", name)
			continue
		}
		pkg, _, _ := strings.Cut(name, ".")
		if err == nil || !strings.HasPrefix(err.Error(), pkg+": ") {
			t.Errorf("%s is %q, which does not begin %q", name, err, pkg+": ")
		}
	}
}

// errName is the name of an error value: ErrNotObtained, not the type
// config.Error.
var errName = regexp.MustCompile(`^Err[A-Z]`)

var (
	// goDocLine is a line of `go doc -short`: a declaration, indented
	// under its type for a constructor or a typed constant.
	goDocLine = regexp.MustCompile(`^( {4})?(const|var|func|type) ([A-Za-z_][A-Za-z0-9_]*)`)
	// groupMember is a name declared in a const or var group, as `go doc
	// PKG NAME` prints the group.
	groupMember = regexp.MustCompile(`^\t([A-Za-z_][A-Za-z0-9_]*(?:, [A-Za-z_][A-Za-z0-9_]*)*)`)
	// nameLink is a doc link of a name of the package ([Name], not
	// [pkg.Name] or [Type.Method]).
	nameLink = regexp.MustCompile(`\[([A-Za-z_][A-Za-z0-9_.]*)\]`)
)

// exportedNames returns the names `go doc -short` shows of pkg: each
// declaration, each constructor listed under its type, and each member of
// a const or var group it shows as "NAME ...". The constants listed under
// their type (its values: `const OutcomeOK Outcome = "ok" ...`) are the
// type's to document, as its methods and fields are: they are in exists,
// not in required.
func exportedNames(t *testing.T, goBin, pkg string) (required, exists map[string]bool) {
	t.Helper()
	required, exists = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(goDoc(t, goBin, "-short", pkg), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := goDocLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("`go doc -short %s` printed %q, which is no declaration this test reads", pkg, line)
		}
		indented, kind, name := m[1] != "", m[2], m[3]
		names := []string{name}
		if (kind == "const" || kind == "var") && strings.HasSuffix(line, " ...") {
			names = groupNames(t, goBin, pkg, name)
		}
		for _, n := range names {
			exists[n] = true
			if !indented || kind == "func" {
				required[n] = true
			}
		}
	}
	if len(required) == 0 {
		t.Fatalf("`go doc -short %s` shows %d names: the parse is broken", pkg, len(required))
	}
	return required, exists
}

// groupNames returns the exported names of the const or var group that
// holds name.
func groupNames(t *testing.T, goBin, pkg, name string) []string {
	t.Helper()
	var names []string
	in := false
	for _, line := range strings.Split(goDoc(t, goBin, pkg, name), "\n") {
		switch {
		case line == "const (" || line == "var (":
			in = true
		case in && line == ")":
			in = false
		case in:
			if m := groupMember.FindStringSubmatch(line); m != nil {
				for _, n := range strings.Split(m[1], ", ") {
					if r, _ := utf8.DecodeRuneInString(n); unicode.IsUpper(r) {
						names = append(names, n)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("`go doc %s %s` shows no group of names", pkg, name)
	}
	return names
}

func goDoc(t *testing.T, goBin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, append([]string{"doc"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go doc %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// docSectionNames returns the names the "# Exported names" section of the
// doc of the package in dir links to.
func docSectionNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, file, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc.WriteString(f.Doc.Text())
		}
	}
	_, section, ok := strings.Cut(doc.String(), "\n"+namesHeading+"\n")
	if !ok {
		t.Fatalf("the doc of package %s has no %q section", dir, namesHeading)
	}
	if i := strings.Index(section, "\n# "); i >= 0 {
		section = section[:i]
	}
	named := map[string]bool{}
	for _, m := range nameLink.FindAllStringSubmatch(section, -1) {
		if !strings.Contains(m[1], ".") {
			named[m[1]] = true
		}
	}
	return named
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
