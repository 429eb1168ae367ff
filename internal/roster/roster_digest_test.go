package roster

import (
	"testing"

	"github.com/batonhq/baton/config"
)

// The roster publishes a digest of each job's definition in Redis; the
// ${VAR} values in it are masked first, so the digest neither changes with a
// secret nor lets a Redis reader test guesses of one.
func TestJobDigestHidesSecrets(t *testing.T) {
	digest := func(token string) string {
		t.Setenv("BATON_TEST_DIGEST_TOKEN", token)
		cfg, err := config.Load([]byte("redis: {url: redis://h:1/0}\njobs:\n  - name: a\n    schedule: '@hourly'\n    exec: {command: [push, '--token=${BATON_TEST_DIGEST_TOKEN}']}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return ListJobs(cfg)["a"].Digest
	}
	if a, b := digest("first-secret-1"), digest("other-secret-2"); a != b {
		t.Errorf("digests %s and %s differ with the secret alone", a, b)
	}
}
