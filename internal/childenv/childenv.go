// Package childenv builds the environment baton gives the commands it runs:
// an allowlist of baton's own variables, not all of them. baton's
// environment holds its own secrets (a Redis password in BATON_REDIS_URL or
// REDISCLI_AUTH, cloud credentials); a job gets only what it is given.
package childenv

import (
	"fmt"
	"regexp"
	"strings"
)

// Default is what every child inherits from baton's environment: a name, or
// a prefix ending in "*".
var Default = []string{"PATH", "HOME", "LANG", "LC_*", "TZ", "USER"}

var patternRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$|^\*$`)

// Check reports what is wrong with an allowlist pattern, or nil.
func Check(p string) error {
	if !patternRE.MatchString(p) {
		return fmt.Errorf("%q is not a variable name or a name prefix ending in *", p)
	}
	return nil
}

// Allowed reports whether name matches one of the patterns.
func Allowed(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// Filter returns the entries of environ (NAME=value) whose names Default or
// extra allow, in order.
func Filter(environ []string, extra []string) []string {
	out := make([]string, 0, len(Default)+len(extra))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if Allowed(name, Default) || Allowed(name, extra) {
			out = append(out, kv)
		}
	}
	return out
}
