package config

import (
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/strictyaml"
)

const redacted = redact.Mask

// formatDuration prints a duration as the config is written: 1m, not 1m0s.
var formatDuration = strictyaml.FormatDuration

// Redacted returns the effective config (defaults included, zero values left
// out) as YAML for logs and `baton validate`. Secrets are masked as "xxxxx":
// passwords in Redis and HTTP URLs, sentinel and cluster passwords, signing
// keys, every
// exec env value and every HTTP header value, and every value that came
// from the environment through ${VAR} (in argv, URLs, bodies, payloads,
// anywhere). Defaults written in the file are shown.
func (c *Config) Redacted() string {
	r := *c
	r.Redis.URL = redactNonEmpty(c.secrets.Value(r.Redis.URL))
	r.HTTP.Token = maskNonEmpty(r.HTTP.Token)
	if s := r.Redis.Sentinel; s != nil {
		s2 := *s
		s2.Password = maskNonEmpty(s2.Password)
		r.Redis.Sentinel = &s2
	}
	if cl := r.Redis.Cluster; cl != nil {
		cl2 := *cl
		cl2.Password = maskNonEmpty(cl2.Password)
		r.Redis.Cluster = &cl2
	}
	if c.Locking.Masters != nil {
		r.Locking.Masters = make([]string, len(c.Locking.Masters))
		for i, m := range c.Locking.Masters {
			r.Locking.Masters[i] = redact.URL(c.secrets.Value(m))
		}
	}
	if c.Security.SigningKeys != nil {
		r.Security.SigningKeys = make([]string, len(c.Security.SigningKeys))
		for i := range r.Security.SigningKeys {
			r.Security.SigningKeys[i] = redacted
		}
	}
	r.Jobs = slices.Clone(c.Jobs)
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if e := j.Exec; e != nil {
			e2 := *e
			e2.Env = maskValues(e.Env)
			j.Exec = &e2
		}
		if h := j.HTTP; h != nil {
			h2 := *h
			h2.URL = redactNonEmpty(c.secrets.Value(h.URL))
			h2.Headers = maskValues(h.Headers)
			j.HTTP = &h2
		}
	}
	root := strictyaml.Encode(reflect.ValueOf(r))
	if jobs := strictyaml.MappingValue(root, "jobs"); jobs != nil && c.secrets != nil {
		// a handler payload has no types to keep: every scalar from the
		// environment is masked, numbers and flags too
		for _, j := range jobs.Content {
			maskScalars(strictyaml.MappingValue(strictyaml.MappingValue(j, "handler"), "payload"), c.secrets, true)
		}
	}
	maskScalars(root, c.secrets, false)
	escapeDollars(root)
	if jobs := strictyaml.MappingValue(root, "jobs"); jobs != nil {
		for i, j := range r.Jobs {
			dropKeys(jobs.Content[i], irrelevantKeys(&j)...)
		}
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return "# " + err.Error() + "\n"
	}
	_ = enc.Close()
	return b.String()
}

// maskScalars masks the secrets in every scalar value under n: strings
// only unless all (elsewhere a number or a flag from the environment is no
// secret, and masking it would make the output not load).
func maskScalars(n *yaml.Node, s *redact.Secrets, all bool) {
	if n == nil || s == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			maskScalars(c, s, all)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			maskScalars(n.Content[i], s, all)
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" && !all {
			return
		}
		if m := s.Value(n.Value); m != n.Value {
			n.Value = m
			n.Tag, n.Style = "!!str", 0
		}
	}
}

// escapeDollars doubles the $ in scalar values where Load would otherwise
// expand or unescape it ("${" and "$$"), so the output loads as the same
// values.
func escapeDollars(n *yaml.Node) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			escapeDollars(c)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			escapeDollars(n.Content[i])
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$$") && !strings.Contains(n.Value, "${") {
			return
		}
		var b strings.Builder
		for i := 0; i < len(n.Value); i++ {
			b.WriteByte(n.Value[i])
			if n.Value[i] == '$' && i+1 < len(n.Value) && (n.Value[i+1] == '$' || n.Value[i+1] == '{') {
				b.WriteByte('$')
			}
		}
		n.Value = b.String()
	}
}

// irrelevantKeys lists the keys that Load rejects for j's mode, so that
// Redacted's output loads again.
func irrelevantKeys(j *Job) []string {
	keys := modeIrrelevantKeys(j)
	if j.Concurrency != ConcurrencyBufferAll {
		keys = append(keys, "buffer_max")
	}
	if j.MaxRuns == 0 {
		keys = append(keys, "max_runs")
	}
	if len(j.After) > 0 {
		keys = append(keys, chainOnlyKeys...)
	} else {
		keys = append(keys, "after", "on_parent_failure")
	}
	return keys
}

func modeIrrelevantKeys(j *Job) []string {
	switch j.Mode {
	case ModeSingleton:
		keys := append(slices.Clone(scheduleKeys), queueKeys...)
		keys = append(keys, "concurrency", "leader")
		if j.Timeout == 0 {
			keys = append(keys, "timeout")
		}
		return keys
	case ModeLocal:
		return append(slices.Clone(queueKeys), "restart_backoff")
	}
	return []string{"restart_backoff", "leader"}
}

func dropKeys(m *yaml.Node, keys ...string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	var kept []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if !slices.Contains(keys, m.Content[i].Value) {
			kept = append(kept, m.Content[i], m.Content[i+1])
		}
	}
	m.Content = kept
}

func redactNonEmpty(s string) string {
	if s == "" {
		return ""
	}
	return redact.URL(s)
}

func maskNonEmpty(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

func maskValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = redacted
	}
	return out
}
