package config

import (
	"slices"
	"strconv"
)

// MaxLimit bounds a limit's size (Config.Limits): a run waiting for a slot
// tries each slot in turn, one call per slot a round.
const MaxLimit = 100

// limits checks the named limits: a name as a job's, a size from 1 to
// MaxLimit.
func (v *validator) limits() {
	for _, name := range slices.Sorted(mapKeys(v.cfg.Limits)) {
		p := "limits." + name
		if !jobNameRE.MatchString(name) {
			v.errf(p, "invalid limit name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", name)
			continue
		}
		if n := v.cfg.Limits[name]; n < 1 || n > MaxLimit {
			v.errf(p, "must be between 1 and %d runs at once, got %d", MaxLimit, n)
		}
	}
}

// jobLimit checks the limit a job names: one of Config.Limits.
func (v *validator) jobLimit(p string, j *Job) {
	if j.Limit == "" {
		if v.set(p + ".limit") {
			v.errf(p+".limit", "empty: name one of the limits (limits: at the top level), or leave it out")
		}
		return
	}
	if _, ok := v.cfg.Limits[j.Limit]; !ok {
		v.errf(p+".limit", "no limit %q%s", j.Limit, v.knownLimits())
	}
}

// knownLimits is ": the limits are a, b" for an error, or ": the config
// defines none (limits: at the top level, such as limits: {warehouse: 2})".
func (v *validator) knownLimits() string {
	return knownNames("limits", v.cfg.Limits, "limits: {warehouse: 2}")
}

// LimitOf is the size of the limit j names and its name, or ("", 0) when it
// names none (or one the config does not define: Load refuses that).
func (c *Config) LimitOf(j *Job) (string, int) {
	if j.Limit == "" {
		return "", 0
	}
	n, ok := c.Limits[j.Limit]
	if !ok {
		return "", 0
	}
	return j.Limit, n
}

// LimitedJobs are the job list's jobs that name limit, in file order.
func (c *Config) LimitedJobs(limit string) []string {
	var out []string
	for i := range c.Jobs {
		if c.Jobs[i].Limit == limit {
			out = append(out, c.Jobs[i].Name)
		}
	}
	return out
}

// limitLine is the line JobDefinition adds for j's limit: its size counts
// in the job's definition.
func (c *Config) limitLine(j *Job) string {
	name, n := c.LimitOf(j)
	if name == "" {
		return ""
	}
	return "\nlimit " + name + ": " + strconv.Itoa(n)
}
