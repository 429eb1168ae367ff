package worker

import (
	"strings"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
)

// Bounds of the output tail a failed run's log line carries.
const (
	tailLines = 10
	tailBytes = 2 << 10
)

// outputTail is the end of a run's captured output for its failure line: at
// most tailLines lines and tailBytes bytes, with the job's own env and
// header values (where its secrets come from) and the config's ${VAR}
// values masked, longest first and before the cut (so a secret the cut
// would fall into is masked whole).
func outputTail(out []byte, job *config.Job) string {
	var values []string
	if job.Exec != nil {
		for _, v := range job.Exec.Env {
			values = append(values, v)
		}
	}
	if job.HTTP != nil {
		for _, v := range job.HTTP.Headers {
			values = append(values, v)
		}
	}
	values = append(values, job.SecretValues()...)
	// the whole capture (at most the executor's output limit) is masked
	// first: a cut made before could fall inside a secret
	s := redact.Of(values...).Text(strings.TrimRight(string(out), "\n"))
	// a capture cut at its limit can end inside a secret (an http job keeps
	// the body's start): a secret's first bytes at the very end go too
	s = maskCutSecret(s, values)
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	if lines := strings.Split(s, "\n"); len(lines) > tailLines {
		s = strings.Join(lines[len(lines)-tailLines:], "\n")
	}
	return strings.ToValidUTF8(s, "?")
}

// maskCutSecret masks the end of s when it is the beginning of one of the
// values (4 bytes or more of it, as redact masks whole values of 4 bytes
// or more).
func maskCutSecret(s string, values []string) string {
	cut := 0
	for _, v := range values {
		for k := len(v) - 1; k >= 4 && k > cut; k-- {
			if strings.HasSuffix(s, v[:k]) {
				cut = k
				break
			}
		}
	}
	if cut == 0 {
		return s
	}
	return s[:len(s)-cut] + redact.Mask
}
