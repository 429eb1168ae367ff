package worker

import (
	"fmt"
	"testing"

	"github.com/batonhq/baton/config"
)

// Each concurrency kind is served by its own policy type, chosen once per
// job when the worker is made; a job the config does not hold gets its
// kind's.
func TestEachConcurrencyIsOnePolicyChosenOncePerJob(t *testing.T) {
	t.Parallel()
	want := map[config.Concurrency]string{
		config.ConcurrencyForbid:    "worker.forbidPolicy",
		config.ConcurrencyAllow:     "worker.allowPolicy",
		config.ConcurrencyReplace:   "worker.replacePolicy",
		config.ConcurrencyBufferOne: "worker.bufferPolicy",
		config.ConcurrencyBufferAll: "worker.bufferPolicy",
	}
	cfg := &config.Config{}
	for c := range want {
		cfg.Jobs = append(cfg.Jobs, config.Job{Name: string(c), Concurrency: c})
	}
	e := &engine{cfg: cfg}
	e.choosePolicies()
	for i := range cfg.Jobs {
		job := &cfg.Jobs[i]
		p := e.policyOf(job)
		if got := fmt.Sprintf("%T", p); got != want[job.Concurrency] {
			t.Errorf("job %q (%s): policy %s, want %s", job.Name, job.Concurrency, got, want[job.Concurrency])
		}
		if _, chosen := e.policies[job.Name]; !chosen {
			t.Errorf("job %q: no policy chosen for it when the worker was made", job.Name)
		}
		other := config.Job{Name: "not-in-config-" + job.Name, Concurrency: job.Concurrency}
		if got := fmt.Sprintf("%T", e.policyOf(&other)); got != want[job.Concurrency] {
			t.Errorf("job %q not in the config (%s): policy %s, want %s", other.Name, other.Concurrency, got, want[job.Concurrency])
		}
	}
}
