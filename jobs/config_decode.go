package jobs

// Decoding works on the yaml.Node tree rather than through yaml.v3's own
// decoder: ${VAR} expansion has to happen on scalar values after parsing (so
// line numbers stay those of the file) and before typing (so ${PORT} can fill
// an int), and yaml.v3 offers KnownFields only when it parses the bytes
// itself. The walk below is that strict decoder: every unknown key, type
// mismatch and bad duration is recorded with its line and the walk goes on, so
// that one Load reports them all.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/redact"
)

// decoder carries the state of one Load.
type decoder struct {
	file     string
	lookup   func(string) (string, bool)
	errs     []FieldError
	lines    map[string]int        // key path -> line of its key
	errPaths map[string]bool       // key paths that already have an error
	expanded map[*yaml.Node]bool   // scalars whose value came from ${...}
	emptyVar map[*yaml.Node]string // scalars that are exactly ${VAR}, VAR set but empty
	jobNames map[int]string        // job index -> name as written, for messages
	secrets  redact.Builder        // values that came from the environment
}

func load(data []byte, file, path string, lookup func(string) (string, bool), now time.Time) (*Config, error) {
	return loadSections(data, file, path, lookup, now, nil)
}

// loadSections is load without the top-level sections named in skip:
// they are neither expanded nor checked. Unknown keys are still errors.
func loadSections(data []byte, file, path string, lookup func(string) (string, bool), now time.Time, skip []string) (*Config, error) {
	d := &decoder{
		file:     file,
		lookup:   lookup,
		lines:    map[string]int{},
		errPaths: map[string]bool{},
		expanded: map[*yaml.Node]bool{},
		emptyVar: map[*yaml.Node]string{},
		jobNames: map[int]string{},
	}
	cfg := defaultConfig()
	root := d.parse(data)
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
		switch size := expandedSize(root, map[*yaml.Node]expansion{}); {
		case size.nodes > maxNodes:
			d.add(0, "", "the document expands to more than %d values through aliases", maxNodes)
			root = nil
		case size.bytes > maxBytes:
			d.add(0, "", "the document is more than %d MiB of text, counting an aliased value at each of its uses", maxBytes>>20)
			root = nil
		}
	}
	if root != nil {
		d.scanJobNames(root)
		d.expandTree(root, "")
		d.decode(root, reflect.ValueOf(&cfg).Elem(), "")
	}
	if len(d.errs) == 0 || root != nil {
		// Validate even after decoding errors, to report everything at
		// once: a value that failed to decode keeps its default, and add
		// drops further problems at a path that already has one. Only a
		// file that did not parse is not validated.
		v := &validator{decoder: d, cfg: &cfg, now: now}
		v.validate()
	}
	for _, k := range cfg.Security.SigningKeys {
		d.secrets.Add(k) // masked however they were written
	}
	secrets := d.secrets.Secrets()
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		for i := range d.errs {
			d.errs[i].Msg = secrets.Text(d.errs[i].Msg)
		}
		return nil, &ConfigError{Errors: d.errs}
	}
	cfg.File = path
	cfg.secrets = secrets
	cfg.byName = make(map[string]int, len(cfg.Jobs))
	for i := range cfg.Jobs {
		cfg.byName[cfg.Jobs[i].Name] = i
		cfg.Jobs[i].secrets = secrets
	}
	return &cfg, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the top-level mapping of the single document in data, or nil
// for an empty document or after an error.
func (d *decoder) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		d.syntaxError(err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.add(extra.Line, "", "a config file holds one YAML document; found another")
		return nil
	case !errors.Is(err, io.EOF):
		d.syntaxError(err)
		return nil
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.add(root.Line, "", "the top level must be a mapping, got %s", describe(root))
		return nil
	}
	return root
}

// maxNodes and maxBytes bound the size of a document with its aliases
// expanded, so a small file cannot make Load walk billions of nodes or copy
// gigabytes of text (one long string aliased thousands of times).
const (
	maxNodes = 1_000_000
	maxBytes = 64 << 20
)

// expansion is the size of a node with its aliases expanded.
type expansion struct{ nodes, bytes int }

func (e expansion) tooLarge() bool { return e.nodes > maxNodes || e.bytes > maxBytes }

// expandedSize returns the size of n with aliases expanded, memoized per
// node so it takes time linear in the file; it saturates above the bounds.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]expansion) expansion {
	if n == nil {
		return expansion{}
	}
	if size, ok := memo[n]; ok {
		return size
	}
	memo[n] = expansion{maxNodes + 1, maxBytes + 1} // an alias cycle counts as too large
	size := expansion{1, len(n.Value)}
	if n.Kind == yaml.AliasNode {
		a := expandedSize(n.Alias, memo)
		size.nodes += a.nodes
		size.bytes += a.bytes
	}
	for _, c := range n.Content {
		cs := expandedSize(c, memo)
		size.nodes += cs.nodes
		size.bytes += cs.bytes
		if size.tooLarge() {
			break
		}
	}
	size.nodes, size.bytes = min(size.nodes, maxNodes+1), min(size.bytes, maxBytes+1)
	memo[n] = size
	return size
}

func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.add(line, "", "%s", m[2])
		return
	}
	d.add(0, "", "%s", strings.TrimPrefix(msg, "yaml: "))
}

// add records a problem at path. A path inside a job ("jobs[3].exec") is
// reported against the job's name when it has one. Only the first problem
// at a path is kept, and none below a path that has one: they would be
// consequences of the first.
func (d *decoder) add(line int, path, format string, args ...any) {
	if path != "" {
		for p := path; p != ""; p = parentPath(p) {
			if d.errPaths[p] {
				return
			}
		}
		d.errPaths[path] = true
	}
	fe := FieldError{File: d.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)}
	if i, rest, ok := splitJobPath(path); ok {
		if name := d.jobNames[i]; name != "" {
			fe.Job, fe.Field = name, rest
		}
	}
	d.errs = append(d.errs, fe)
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
	jobs := mappingValue(root, "jobs")
	if jobs == nil || jobs.Kind != yaml.SequenceNode {
		return
	}
	for i, item := range jobs.Content {
		if name := mappingValue(resolveAlias(item), "name"); name != nil && name.Kind == yaml.ScalarNode {
			d.jobNames[i] = name.Value
		}
	}
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolveAlias(n.Content[i+1])
		}
	}
	return nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// parentPath returns "a.b" for "a.b.c" and "a.b[2]", and "" for "a".
func parentPath(path string) string {
	if i := strings.LastIndexByte(path, '['); i >= 0 && strings.HasSuffix(path, "]") {
		return path[:i]
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expandTree expands ${...} in every scalar value under n (not in mapping
// keys). Aliases are skipped: the node they point to is expanded where it is
// defined, exactly once.
func (d *decoder) expandTree(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.expandTree(n.Content[i+1], joinPath(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.expandTree(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		out, masked, err := expandEnv(n.Value, d.lookup, &d.secrets)
		if err != nil {
			d.add(n.Line, path, "%s", err.Error())
			return
		}
		if out == n.Value {
			return
		}
		if m := plainVarRE.FindStringSubmatch(n.Value); m != nil && out == "" {
			d.emptyVar[n] = m[1]
		}
		n.Value = out
		d.expanded[n] = true
		d.secrets.AddValue(out, masked)
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
	"BATON_FENCING_TOKEN": true, "BATON_REPLICA": true, "BATON_LOCK_KEY": true}

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

var (
	durationType   = reflect.TypeFor[time.Duration]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

// defaulter is implemented by types whose new values start from defaults
// (job entries).
type defaulter interface{ applyDefaults() }

// decode stores n into v, which must be settable. path names v for messages.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = resolveAlias(n)
	if n == nil || d.absent(n) {
		return
	}
	t := v.Type()
	switch {
	case t == durationType:
		if !d.expectScalar(n, path, "a duration") {
			return
		}
		dur, err := time.ParseDuration(strings.TrimSpace(n.Value))
		if err != nil {
			hint := ""
			if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
				hint = " (add a unit: ns, us, ms, s, m, h)"
			}
			d.add(n.Line, path, "invalid duration %q%s", n.Value, hint)
			return
		}
		v.SetInt(int64(dur))
		return
	case t == rawMessageType:
		raw, err := nodeJSON(n)
		if err != nil {
			line := n.Line
			var le *lineError
			if errors.As(err, &le) {
				line = le.line
			}
			d.add(line, path, "%s", err.Error())
			return
		}
		v.SetBytes(raw)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(n.Line, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = item.Line
			if df, ok := s.Index(i).Addr().Interface().(defaulter); ok {
				df.applyDefaults()
			}
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(n.Line, path, "expected a mapping, got %s", describe(n))
			return
		}
		m := reflect.MakeMap(t)
		for _, kv := range d.pairs(n, path) {
			if !d.expectScalar(kv.key, path, "a string key") {
				continue
			}
			p := joinPath(path, kv.key.Value)
			d.lines[p] = kv.key.Line
			e := reflect.New(t.Elem()).Elem()
			d.decode(kv.value, e, p)
			m.SetMapIndex(reflect.ValueOf(kv.key.Value).Convert(t.Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if d.expectScalar(n, path, "a string") {
			v.SetString(n.Value)
		}
	case reflect.Int:
		if !d.expectScalar(n, path, "an integer") {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(n.Value), "_", ""), 10, 64)
		if err != nil {
			d.add(n.Line, path, "expected an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		if !d.expectScalar(n, path, "true or false") {
			return
		}
		switch strings.ToLower(strings.TrimSpace(n.Value)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.add(n.Line, path, "expected true or false, got %q", n.Value)
		}
	default:
		panic("jobs: config field of unsupported type " + t.String())
	}
}

func (d *decoder) expectScalar(n *yaml.Node, path, want string) bool {
	if n.Kind == yaml.ScalarNode {
		return true
	}
	d.add(n.Line, path, "expected %s, got %s", want, describe(n))
	return false
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, path, "expected a mapping, got %s", describe(n))
		return
	}
	if path == "" {
		d.lines[""] = n.Line
	}
	fields := structFields(v.Type())
	for _, kv := range d.pairs(n, path) {
		key := kv.key.Value
		p := joinPath(path, key)
		idx, ok := fields[key]
		if !ok {
			if path == "" && strings.HasPrefix(key, "x-") {
				continue // extension field: a place for anchors
			}
			msg := fmt.Sprintf("unknown field %q", key)
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.add(kv.key.Line, p, "%s", msg)
			continue
		}
		if val := resolveAlias(kv.value); d.absent(val) {
			if name := d.emptyVar[val]; name != "" {
				d.add(val.Line, p, "environment variable %s is set but empty, so this field would silently keep its default: give it a value, or write ${%s:-} to take the default on purpose", name, name)
			}
		} else {
			d.lines[p] = kv.key.Line
		}
		d.decode(kv.value, v.Field(idx), p)
	}
}

type pair struct{ key, value *yaml.Node }

// pairs returns the key/value pairs of a mapping with merge keys ("<<")
// applied: explicit keys win over merged ones, and among merged mappings the
// first listed wins. An explicit key given twice is an error.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var explicit, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!!merge" || k.ShortTag() == "!!merge") {
			merged = append(merged, d.mergeSources(val, path)...)
			continue
		}
		if k.Kind == yaml.ScalarNode {
			if line, dup := seen[k.Value]; dup {
				d.add(k.Line, joinPath(path, k.Value), "duplicate key (first at line %d)", line)
				continue
			}
			seen[k.Value] = k.Line
		}
		explicit = append(explicit, pair{k, val})
	}
	out := explicit
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; !ok {
			seen[p.key.Value] = p.key.Line
			out = append(out, p)
		}
	}
	return out
}

func (d *decoder) mergeSources(val *yaml.Node, path string) []pair {
	val = resolveAlias(val)
	var sources []*yaml.Node
	switch val.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{val}
	case yaml.SequenceNode:
		for _, s := range val.Content {
			sources = append(sources, resolveAlias(s))
		}
	}
	var out []pair
	for _, s := range sources {
		if s.Kind != yaml.MappingNode {
			d.add(s.Line, joinPath(path, "<<"), "a merge key needs a mapping or a list of mappings, got %s", describe(s))
			continue
		}
		out = append(out, d.pairs(s, path)...)
	}
	return out
}

var fieldCache sync.Map // reflect.Type -> map[string]int

// structFields maps a struct's yaml keys to field indexes.
func structFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = i
	}
	fieldCache.Store(t, m)
	return m
}

// suggest returns the known key closest to key, if it is close.
func suggest(key string, fields map[string]int) string {
	best, bestDist := "", 3
	for name := range fields {
		if dist := editDistance(key, name); dist < bestDist || (dist == bestDist && name < best) {
			best, bestDist = name, dist
		}
	}
	if bestDist > 2 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// lineError is a problem inside a value, at its own line.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return e.msg }

// nodeJSON converts a YAML value to JSON.
func nodeJSON(n *yaml.Node) (json.RawMessage, error) {
	v, err := nodeValue(n)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be converted to JSON: %w", err)
	}
	return raw, nil
}

// mergeJSON applies a merge key's value (a mapping or a list of them) to m
// without overriding keys m already has.
func mergeJSON(m map[string]any, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			if _, set := m[k]; !set {
				m[k] = val
			}
		}
	case []any:
		for _, s := range v {
			mergeJSON(m, s)
		}
	}
}

func nodeValue(n *yaml.Node) (any, error) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolveAlias(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				return nil, &lineError{k.Line, "mapping keys must be strings to convert to JSON"}
			}
			v, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				mergeJSON(m, v)
				continue
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, &lineError{n.Line, err.Error()}
		}
		return v, nil
	}
	return nil, nil
}
