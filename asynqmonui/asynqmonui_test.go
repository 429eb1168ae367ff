package asynqmonui_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A Go program that embeds baton (the root package, config and jobs) does
// not link asynqmon: only a program that imports asynqmonui does.
func TestEmbeddingDoesNotLinkAsynqmon(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const mod = "github.com/batonhq/baton"
	out, err := exec.Command(gobin, "list", "-deps", mod, mod+"/config", mod+"/jobs").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/hibiken/asynqmon") || dep == mod+"/asynqmonui" {
			t.Errorf("an embedding program links %s", dep)
		}
	}
	out, err = exec.Command(gobin, "list", "-deps", mod+"/asynqmonui").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/hibiken/asynqmon\n") {
		t.Errorf("asynqmonui does not link asynqmon: the check above checks nothing\n%s", out)
	}
}
