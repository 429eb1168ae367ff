package strictyaml

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/nearest"
)

// Decoder stores YAML nodes into Go values. Struct fields are matched by
// their yaml tag; an unknown key is a problem with a did-you-mean; a
// time.Duration takes Go's duration syntax; a json.RawMessage takes any
// YAML value as JSON; merge keys ("<<") and aliases work everywhere. Every
// problem is recorded (see Add) and the walk goes on, so one decode reports
// them all; a value that fails to decode keeps what it had.
//
// The zero Decoder is not usable: set Report. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	// Report receives each problem Add keeps. Required.
	Report func(Problem)
	// Absent reports whether a scalar stands for "no value", which leaves
	// the field as it is. Nil: a YAML null.
	Absent func(n *yaml.Node) bool
	// OnAbsent, if set, is called for each struct field whose value is
	// absent, with the field's path.
	OnAbsent func(n *yaml.Node, path string)
	// Init, if set, is called with a pointer to each new list element
	// before it is decoded: a place to set defaults.
	Init func(elem any)
	// Extensions lets top-level keys that start with "x-" through
	// unchecked, as places for anchors.
	Extensions bool

	lines    map[string]int  // key path -> line of its key
	errPaths map[string]bool // key paths that already have a problem
}

// Add records a problem at path, formatted as fmt.Sprintf does, and passes
// it to Report. Only the first problem at a path is kept, and none below a
// path that has one: they would be consequences of the first.
func (d *Decoder) Add(line int, path, format string, args ...any) {
	if path != "" {
		for p := path; p != ""; p = ParentPath(p) {
			if d.errPaths[p] {
				return
			}
		}
		if d.errPaths == nil {
			d.errPaths = map[string]bool{}
		}
		d.errPaths[path] = true
	}
	d.Report(Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Line returns the line of the key that gave path a value, and whether the
// document gave it one.
func (d *Decoder) Line(path string) (int, bool) {
	l, ok := d.lines[path]
	return l, ok
}

// LineOf returns the line of path, or of its nearest ancestor that the
// document gave a value; 0 if none did.
func (d *Decoder) LineOf(path string) int {
	for ; path != ""; path = ParentPath(path) {
		if l, ok := d.lines[path]; ok {
			return l
		}
	}
	return 0
}

// Decode stores the document root (see Parse) into v, a non-nil pointer.
func (d *Decoder) Decode(root *yaml.Node, v any) {
	d.decode(root, reflect.ValueOf(v).Elem(), "")
}

func (d *Decoder) setLine(path string, line int) {
	if d.lines == nil {
		d.lines = map[string]int{}
	}
	d.lines[path] = line
}

func (d *Decoder) absent(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	if d.Absent != nil {
		return d.Absent(n)
	}
	return n.ShortTag() == "!!null"
}

var (
	durationType   = reflect.TypeFor[time.Duration]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

// decode stores n into v, which must be settable. path names v for messages.
func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = ResolveAlias(n)
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
			d.Add(n.Line, path, "invalid duration %q%s", n.Value, hint)
			return
		}
		v.SetInt(int64(dur))
		return
	case t == rawMessageType:
		raw, err := NodeJSON(n)
		if err != nil {
			line := n.Line
			var le *lineError
			if errors.As(err, &le) {
				line = le.line
			}
			d.Add(line, path, "%s", err.Error())
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
			d.Add(n.Line, path, "expected a list, got %s", Describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := IndexPath(path, i)
			d.setLine(p, item.Line)
			if d.Init != nil {
				d.Init(s.Index(i).Addr().Interface())
			}
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.Add(n.Line, path, "expected a mapping, got %s", Describe(n))
			return
		}
		m := reflect.MakeMap(t)
		for _, kv := range d.pairs(n, path) {
			if !d.expectScalar(kv.key, path, "a string key") {
				continue
			}
			p := JoinPath(path, kv.key.Value)
			d.setLine(p, kv.key.Line)
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
			d.Add(n.Line, path, "expected an integer, got %q", n.Value)
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
			d.Add(n.Line, path, "expected true or false, got %q", n.Value)
		}
	default:
		panic("strictyaml: field of unsupported type " + t.String())
	}
}

func (d *Decoder) expectScalar(n *yaml.Node, path, want string) bool {
	if n.Kind == yaml.ScalarNode {
		return true
	}
	d.Add(n.Line, path, "expected %s, got %s", want, Describe(n))
	return false
}

func (d *Decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.Add(n.Line, path, "expected a mapping, got %s", Describe(n))
		return
	}
	if path == "" {
		d.setLine("", n.Line)
	}
	fields := structFields(v.Type())
	for _, kv := range d.pairs(n, path) {
		key := kv.key.Value
		p := JoinPath(path, key)
		idx, ok := fields[key]
		if !ok {
			if path == "" && d.Extensions && strings.HasPrefix(key, "x-") {
				continue // extension field: a place for anchors
			}
			msg := fmt.Sprintf("unknown field %q", key)
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.Add(kv.key.Line, p, "%s", msg)
			continue
		}
		if val := ResolveAlias(kv.value); d.absent(val) {
			if d.OnAbsent != nil {
				d.OnAbsent(val, p)
			}
		} else {
			d.setLine(p, kv.key.Line)
		}
		d.decode(kv.value, v.Field(idx), p)
	}
}

type pair struct{ key, value *yaml.Node }

// pairs returns the key/value pairs of a mapping with merge keys ("<<")
// applied: explicit keys win over merged ones, and among merged mappings the
// first listed wins. An explicit key given twice is a problem.
func (d *Decoder) pairs(n *yaml.Node, path string) []pair {
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
				d.Add(k.Line, JoinPath(path, k.Value), "duplicate key (first at line %d)", line)
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

func (d *Decoder) mergeSources(val *yaml.Node, path string) []pair {
	val = ResolveAlias(val)
	var sources []*yaml.Node
	switch val.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{val}
	case yaml.SequenceNode:
		for _, s := range val.Content {
			sources = append(sources, ResolveAlias(s))
		}
	}
	var out []pair
	for _, s := range sources {
		if s.Kind != yaml.MappingNode {
			d.Add(s.Line, JoinPath(path, "<<"), "a merge key needs a mapping or a list of mappings, got %s", Describe(s))
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
		if dist := nearest.Distance(key, name); dist < bestDist || (dist == bestDist && name < best) {
			best, bestDist = name, dist
		}
	}
	if bestDist > 2 {
		return ""
	}
	return best
}

// lineError is a problem inside a value, at its own line.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return e.msg }

// NodeJSON converts a YAML value to JSON (mapping keys must be strings).
func NodeJSON(n *yaml.Node) (json.RawMessage, error) {
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
	n = ResolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := ResolveAlias(n.Content[i])
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
