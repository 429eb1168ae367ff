package jobs

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
)

// The holder record and the replace request carry their format versions.
func TestHolderRecordAndReplaceRequestCarryFormatVersion(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{holderRecord{V: formats.HolderRecord, ID: "report@2026-11-28T12:00:00Z", Tick: "2026-11-28T12:00:00Z", RunID: "r1", Attempt: 1, Replica: "a"},
			`{"v":1,"id":"report@2026-11-28T12:00:00Z","tick":"2026-11-28T12:00:00Z","run_id":"r1","attempt":1,"replica":"a"}`},
		{cancelRequest{V: formats.CancelRequest, ID: "report@2026-11-28T12:00:00Z", Tick: "2026-11-28T12:00:00Z", Replica: "a"},
			`{"v":1,"id":"report@2026-11-28T12:00:00Z","tick":"2026-11-28T12:00:00Z","replica":"a"}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%T\n got %s\nwant %s", tc.v, b, tc.want)
		}
	}
}

// Each concurrency kind is served by its own policy type, chosen once per
// job when the worker is made; a job the config does not hold gets its
// kind's.
func TestEachConcurrencyIsOnePolicyChosenOncePerJob(t *testing.T) {
	want := map[config.Concurrency]string{
		config.ConcurrencyForbid:    "jobs.forbidPolicy",
		config.ConcurrencyAllow:     "jobs.allowPolicy",
		config.ConcurrencyReplace:   "jobs.replacePolicy",
		config.ConcurrencyBufferOne: "jobs.bufferPolicy",
		config.ConcurrencyBufferAll: "jobs.bufferPolicy",
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
