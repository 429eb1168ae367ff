package config

// Loading works on the yaml.Node tree (internal/strictyaml) rather than
// through yaml.v3's own decoder: ${VAR} expansion has to happen on scalar
// values after parsing (so line numbers stay those of the file) and before
// typing (so ${PORT} can fill an int). Every unknown key, type mismatch and
// bad value is recorded with its line and the walk goes on, so that one Load
// reports them all.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/strictyaml"
)

// decoder carries the state of one Load.
type decoder struct {
	strictyaml.Decoder
	file     string
	lookup   func(string) (string, bool)
	errs     []FieldError
	errPaths []string              // the key path of each of errs, as reported
	expanded map[*yaml.Node]bool   // scalars whose value came from ${...}
	emptyVar map[*yaml.Node]string // scalars that are exactly ${VAR}, VAR set but empty
	jobNames map[int]string        // job index -> name as written, for messages
	fromEnv  map[string]envValue   // key path -> what of its value came from ${VAR}
	secrets  redact.Builder        // values that came from the environment
	size     int                   // the file's bytes plus what ${VAR} values added so far
	overSize bool                  // size passed MaxFileSize: nothing more is expanded
}

func load(data []byte, file, path string, lookup func(string) (string, bool), now time.Time) (*Config, error) {
	return loadSections(data, file, path, lookup, now, nil)
}

// loadSections is load without the top-level sections named in skip:
// they are neither expanded nor checked. Unknown keys are still errors.
func loadSections(data []byte, file, path string, lookup func(string) (string, bool), now time.Time, skip []string) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(file, int64(len(data)))
	}
	d := &decoder{
		file:     file,
		lookup:   lookup,
		size:     len(data),
		expanded: map[*yaml.Node]bool{},
		emptyVar: map[*yaml.Node]string{},
		jobNames: map[int]string{},
		fromEnv:  map[string]envValue{},
	}
	d.Report = d.report
	d.Absent = d.absent
	d.OnAbsent = d.onAbsent
	d.Init = func(elem any) {
		if j, ok := elem.(*Job); ok {
			j.applyDefaults()
		}
	}
	d.Extensions = true
	cfg := defaultConfig()
	root, problem := strictyaml.Parse(data, "a config file")
	if problem != nil {
		d.report(*problem)
	}
	if root != nil && skip != nil {
		var kept []*yaml.Node
		for i := 0; i+1 < len(root.Content); i += 2 {
			if !slices.Contains(skip, root.Content[i].Value) {
				kept = append(kept, root.Content[i], root.Content[i+1])
			}
		}
		root.Content = kept
	}
	if root != nil {
		// the bound counts what is walked: sections skipped are not
		if problem = strictyaml.Bound(root); problem != nil {
			d.report(*problem)
			root = nil
		}
	}
	if root != nil {
		d.scanJobNames(root)
		d.expandTree(root, "")
		d.Decode(root, &cfg)
	}
	if problem == nil {
		// Validate even after decoding errors, to report everything at
		// once: a value that failed to decode keeps its default, and add
		// drops further problems at a path that already has one. Only a
		// file that did not parse is not validated.
		cfg.File = path // a calendar file is read beside it
		v := &validator{decoder: d, cfg: &cfg, now: now}
		v.validate()
	}
	for _, k := range cfg.Security.SigningKeys {
		d.secrets.Add(k) // masked however they were written
	}
	secrets := d.secrets.Secrets()
	if len(d.errs) > 0 {
		// a message may quote a piece of a value (a port, a field of a
		// schedule): a quoted piece of a ${VAR} value is masked, of any
		// length where the value is the field's, of 4 bytes or more
		// anywhere. The schedule parser prints a field unquoted ("failed
		// to parse int from xyz"): there, a word of 3 bytes or more of the
		// schedule's own ${VAR} values is masked too.
		for i := range d.errs {
			msg, path := d.errs[i].Msg, d.errPaths[i]
			if own := d.envValuesAt(path); len(own) > 0 {
				msg = secrets.Parts(msg, 1)
				if _, rest, ok := splitJobPath(path); ok && rest == "schedule" {
					msg = redact.Of(own...).Words(msg, 3)
				}
			} else {
				msg = secrets.Parts(msg, redact.MinSubstring)
			}
			d.errs[i].Msg = msg
		}
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		return nil, &Error{Errors: d.errs}
	}
	cfg.File = path
	cfg.secrets = secrets
	cfg.Locking.freshInFile = cfg.Locking.FreshDeployment
	cfg.loadedSkew = cfg.MaxClockSkew
	cfg.byName = make(map[string]int, len(cfg.Jobs))
	for i := range cfg.Jobs {
		cfg.byName[cfg.Jobs[i].Name] = i
		cfg.Jobs[i].secrets = secrets
	}
	return &cfg, nil
}

// add records a problem at path (see strictyaml.Decoder.Add).
func (d *decoder) add(line int, path, format string, args ...any) {
	d.Add(line, path, format, args...)
}

// report keeps a problem as a FieldError. A path inside a job
// ("jobs[3].exec") is reported against the job's name when it has one.
func (d *decoder) report(p strictyaml.Problem) {
	fe := FieldError{File: d.file, Line: p.Line, Field: p.Path, Msg: p.Msg}
	if i, rest, ok := splitJobPath(p.Path); ok {
		if name := d.jobNames[i]; name != "" {
			fe.Job, fe.Field = name, rest
		}
	}
	d.errs = append(d.errs, fe)
	d.errPaths = append(d.errPaths, p.Path)
}

// envValue is what of a scalar's value came from ${VAR}.
type envValue struct {
	masked string   // the value with each variable's value masked
	values []string // the variables' values
}

// envValuesAt returns the ${VAR} values of the scalars at path and under
// it: a message about path may quote a piece of them.
func (d *decoder) envValuesAt(path string) []string {
	var out []string
	for p, e := range d.fromEnv {
		if p == path || path == "" || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			out = append(out, e.values...)
		}
	}
	return out
}

// onAbsent reports a field left at its default because a variable it names
// is set but empty.
func (d *decoder) onAbsent(n *yaml.Node, path string) {
	if name := d.emptyVar[n]; name != "" {
		d.add(n.Line, path, "environment variable %s is set but empty, so this field would silently keep its default: give it a value, or write ${%s:-} to take the default on purpose", name, name)
	}
}

// splitJobPath splits "jobs[3].exec.command" into 3 and "exec.command".
func splitJobPath(path string) (int, string, bool) {
	rest, ok := strings.CutPrefix(path, "jobs[")
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return i, strings.TrimPrefix(rest, "."), true
}

// scanJobNames notes each job's name as written, so that problems found
// before or without decoding the name still say which job they are in.
func (d *decoder) scanJobNames(root *yaml.Node) {
	jobs := strictyaml.MappingValue(root, "jobs")
	if jobs == nil || jobs.Kind != yaml.SequenceNode {
		return
	}
	for i, item := range jobs.Content {
		if name := strictyaml.MappingValue(strictyaml.ResolveAlias(item), "name"); name != nil && name.Kind == yaml.ScalarNode {
			d.jobNames[i] = name.Value
		}
	}
}

// expandTree expands ${...} in every scalar value under n (not in mapping
// keys). Aliases are skipped: the node they point to is expanded where it is
// defined, exactly once.
func (d *decoder) expandTree(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.expandTree(n.Content[i+1], strictyaml.JoinPath(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.expandTree(c, strictyaml.IndexPath(path, i))
		}
	case yaml.ScalarNode:
		if d.overSize || !strings.Contains(n.Value, "$") {
			return
		}
		var own redact.Builder // the values of this scalar's variables
		out, masked, err := expandEnv(n.Value, d.lookup, &own)
		vals := own.Values()
		for _, v := range vals {
			d.secrets.Add(v)
		}
		if err != nil {
			d.add(n.Line, path, "%s", err.Error())
			return
		}
		if out == n.Value {
			return
		}
		// a few bytes of ${VAR} can stand for many of a value: the bound
		// on a file's size holds for what it expands to, too
		if d.size += len(out) - len(n.Value); d.size > MaxFileSize {
			if !d.overSize {
				d.overSize = true
				d.add(n.Line, path, "the values of ${...} make the config larger than the bound of %d MiB (%d bytes): it is not expanded further (is a large variable referenced many times?)",
					MaxFileSize>>20, MaxFileSize)
			}
			return
		}
		if m := plainVarRE.FindStringSubmatch(n.Value); m != nil && out == "" {
			d.emptyVar[n] = m[1]
		}
		n.Value = out
		d.expanded[n] = true
		d.secrets.AddValue(out, masked)
		if len(vals) > 0 {
			d.fromEnv[path] = envValue{masked: masked, values: vals}
		}
		if n.Style&yaml.TaggedStyle == 0 {
			n.Tag = "" // resolve the new value afresh (a number stays a number)
		}
	}
}

var (
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	plainVarRE = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)
)

// runVars are the variables a run gets from baton: they exist when the job
// runs, not when the config is loaded.
var runVars = map[string]bool{"BATON_JOB": true, "BATON_TICK": true, "BATON_RUN_ID": true, "BATON_ATTEMPT": true,
	"BATON_FENCING_TOKEN": true, "BATON_REPLICA": true, "BATON_LOCK_KEY": true,
	"BATON_LIMIT": true, "BATON_LIMIT_SLOT": true, "BATON_LIMIT_FENCING_TOKEN": true}

// expandEnv replaces ${VAR} and ${VAR:-default} in s and turns $$ into $.
// Any other $ is kept as it is. masked is out with every value that came
// from the environment replaced by redact.Mask (defaults, written in the
// file, are shown).
func expandEnv(s string, lookup func(string) (string, bool), sec *redact.Builder) (out, masked string, err error) {
	var b, m strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			m.WriteString(s)
			return b.String(), m.String(), nil
		}
		b.WriteString(s[:i])
		m.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			m.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			m.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", "", fmt.Errorf("unterminated %q (write $$ for a literal $)", s[i:])
		}
		expr := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !envNameRE.MatchString(name) {
			return "", "", fmt.Errorf("bad variable name in ${%s} (want ${NAME} or ${NAME:-default}; write $$ for a literal $)", expr)
		}
		val, ok := lookup(name)
		switch {
		case hasDef && val == "":
			b.WriteString(def)
			m.WriteString(def)
			continue
		case !ok && runVars[name]:
			return "", "", fmt.Errorf("${%s} is expanded when the config is loaded, but %s exists only when the job runs: write $${%s} (or $%s in a shell command) to leave it to the run", name, name, name, name)
		case !ok:
			return "", "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} to give a default)", name, name)
		}
		b.WriteString(val)
		m.WriteString(redact.Mask)
		sec.Add(val)
	}
}

// absent reports whether n stands for "no value": a null, or a value that
// expanded to the empty string. Absent values leave the default in place.
func (d *decoder) absent(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	if d.expanded[n] {
		return n.Value == ""
	}
	return n.ShortTag() == "!!null"
}
