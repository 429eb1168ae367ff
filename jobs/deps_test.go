package jobs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the module paths a handler author's packages must not link: the
// RPC stack and exporters of tracing, the queue, the metrics library.
var heavy = []string{
	"google.golang.org/grpc",
	"go.opentelemetry.io/otel/exporters/",
	"go.opentelemetry.io/otel/sdk",
	"github.com/hibiken/asynq",
	"github.com/prometheus/",
}

// client are the module paths of the Redis client and what it brings (IDNA
// tables of x/net and x/text): the leaves below link none either.
var client = []string{"github.com/redis/go-redis/", "golang.org/x/net/", "golang.org/x/text/"}

// The handler API (jobs), the job list (config) and the spec parser
// (schedule) are leaves on the standard library, YAML and cron: a program
// that only registers handlers or reads a job list builds without gRPC,
// exporters, asynq, Prometheus or a Redis client (a third of the baton
// command's first build). The baton command, which links them all, shows
// the check can fail.
func TestHandlerAPILinksNoHeavyDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(gobin, append([]string{"list", "-deps"}, strings.Fields(pkg)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		return strings.Fields(string(out))
	}
	linked := func(pkgs []string, heavy ...string) []string {
		var out []string
		for _, p := range pkgs {
			for _, h := range heavy {
				if strings.HasPrefix(p, h) {
					out = append(out, p)
					break
				}
			}
		}
		return out
	}
	const mod = "github.com/batonhq/baton"
	for _, pkg := range []string{mod + "/jobs", mod + "/config", mod + "/schedule"} {
		if got := linked(deps(pkg), append(heavy, client...)...); len(got) > 0 {
			t.Errorf("%s links %d packages it must not, first %s", pkg, len(got), strings.Join(got[:min(3, len(got))], ", "))
		}
	}
	// the scheduler and the lock library link the tracing API alone; the
	// SDK, the exporters and gRPC come with otlpenv
	for _, pkg := range []string{mod + "/scheduler", mod + "/locking"} {
		if got := linked(deps(pkg), heavy...); len(got) > 0 {
			t.Errorf("%s links %d packages it must not, first %s", pkg, len(got), strings.Join(got[:min(3, len(got))], ", "))
		}
	}
	// the root package (a program embedding replicas) and make dev's build
	// (tags dev,nootlp) link no gRPC, SDK or exporter: package otlpenv does
	exporters := []string{"google.golang.org/grpc", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/"}
	for _, pkg := range []string{mod, "-tags=dev,nootlp " + mod + "/cmd/baton"} {
		if got := linked(deps(pkg), exporters...); len(got) > 0 {
			t.Errorf("%s links %d packages it must not, first %s", pkg, len(got), strings.Join(got[:min(3, len(got))], ", "))
		}
	}
	if bin := deps(mod + "/cmd/baton"); len(linked(bin, heavy...)) == 0 || len(linked(bin, client...)) == 0 {
		t.Error("the baton command links none of the heavy packages or no Redis client: the checks above check nothing")
	}
}
