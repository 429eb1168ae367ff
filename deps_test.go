package baton_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The root package is the library: it imports no net/http (the HTTP API,
// the dashboard and /metrics are package batonhttp's) and links no
// Prometheus (Replica.Stats is plain values). Package batonhttp, which
// imports both, shows the check can fail.
func TestRootImportsNoHTTPOrPrometheus(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	list := func(args ...string) []string {
		out, err := exec.Command(gobin, append([]string{"list"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.Fields(string(out))
	}
	prometheus := func(p string) bool { return strings.HasPrefix(p, "github.com/prometheus/") }
	const mod = "github.com/batonhq/baton"
	imports := list("-f", `{{join .Imports " "}}`, mod)
	if slices.Contains(imports, "net/http") || slices.ContainsFunc(imports, prometheus) {
		t.Errorf("package baton imports net/http or Prometheus: %v", imports)
	}
	if deps := list("-deps", mod); slices.ContainsFunc(deps, prometheus) {
		t.Errorf("package baton links Prometheus (go list -deps %s)", mod)
	}
	served := list("-f", `{{join .Imports " "}}`, mod+"/batonhttp")
	if !slices.Contains(served, "net/http") || !slices.ContainsFunc(served, prometheus) {
		t.Errorf("package batonhttp imports neither net/http nor Prometheus (%v): the checks above check nothing", served)
	}
}
