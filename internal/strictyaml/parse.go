// Package strictyaml decodes YAML into Go structs strictly, reporting every
// problem with its line, and encodes them back the same way.
//
// yaml.v3's own decoder stops at the first error and offers KnownFields only
// when it parses the bytes itself. baton's config needs more: every unknown
// key (with a did-you-mean), type mismatch and bad duration reported at once
// with its line; aliases and merge keys; a bound on what aliases expand to;
// and a chance to rewrite scalar values (${VAR} expansion) after parsing, so
// line numbers stay those of the file, and before typing, so ${PORT} can
// fill an int. The decoder therefore walks the yaml.Node tree: Parse reads
// one document, a Decoder stores it into a value, and Encode is its mirror
// for printing.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a document: the line it is on (0 when it
// has none), the key path of the value ("jobs[3].exec.command"; empty for
// the document) and what is wrong.
type Problem struct {
	Line int
	Path string
	Msg  string
}

// MaxNodes and MaxBytes bound the size of a document with its aliases
// expanded, so a small file cannot make a decoder walk billions of nodes or
// copy gigabytes of text (one long string aliased thousands of times).
const (
	MaxNodes = 1_000_000
	MaxBytes = 64 << 20
)

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse returns the top-level mapping of the single document in data, nil
// for an empty document, or nil and the problem that stops the document from
// being decoded: a syntax error, a second document, a top level that is not
// a mapping. what names the document in messages ("a config file"). Call
// Bound before walking what is kept of it.
func Parse(data []byte, what string) (*yaml.Node, *Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxProblem(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &Problem{Line: extra.Line, Msg: what + " holds one YAML document; found another"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxProblem(err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Problem{Line: root.Line, Msg: "the top level must be a mapping, got " + Describe(root)}
	}
	return root, nil
}

// Bound returns the problem of a document of more than MaxNodes values
// (keys, list items and scalars) or MaxBytes of text, aliases expanded; nil
// for one within the bounds. A document that is over MaxNodes as written
// is reported at its largest mapping or list, one that is over only
// through its aliases as such. It takes time linear in the document as
// written.
func Bound(root *yaml.Node) *Problem {
	if w := writtenSize(root, ""); w.nodes > MaxNodes {
		what, unit := "list", "items"
		if w.largest.Kind == yaml.MappingNode {
			what, unit = "mapping", "keys"
		}
		if w.largestPath == "" {
			what = "top-level " + what
		}
		return &Problem{Line: w.largest.Line, Path: w.largestPath, Msg: fmt.Sprintf(
			"a %s of %d %s: a document may hold at most %d values (keys, list items and scalars), and this one holds %d without counting aliases",
			what, w.largestLen, unit, MaxNodes, w.nodes)}
	}
	switch size := expandedSize(root, map[*yaml.Node]expansion{}); {
	case size.nodes > MaxNodes:
		return &Problem{Msg: fmt.Sprintf("the document expands to more than %d values through aliases", MaxNodes)}
	case size.bytes > MaxBytes:
		return &Problem{Msg: fmt.Sprintf("the document is more than %d MiB of text, counting an aliased value at each of its uses", MaxBytes>>20)}
	}
	return nil
}

// written is the size of a document as written (an alias is one value)
// and its largest mapping or list.
type written struct {
	nodes       int
	largest     *yaml.Node
	largestPath string
	largestLen  int // keys of a mapping, items of a list
}

// writtenSize returns the size of n, at path, as written.
func writtenSize(n *yaml.Node, path string) written {
	w := written{nodes: 1}
	if n == nil || n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
		return w
	}
	w.largest, w.largestPath, w.largestLen = n, path, len(n.Content)
	if n.Kind == yaml.MappingNode {
		w.largestLen = len(n.Content) / 2
	}
	add := func(c written) {
		w.nodes += c.nodes
		if c.largest != nil && c.largestLen > w.largestLen {
			w.largest, w.largestPath, w.largestLen = c.largest, c.largestPath, c.largestLen
		}
	}
	for i, c := range n.Content {
		switch {
		case c.Kind != yaml.MappingNode && c.Kind != yaml.SequenceNode:
			w.nodes++ // a scalar or an alias: no path needed
		case n.Kind == yaml.MappingNode && i%2 == 1:
			add(writtenSize(c, JoinPath(path, n.Content[i-1].Value)))
		case n.Kind == yaml.MappingNode:
			add(writtenSize(c, path)) // a complex key
		default:
			add(writtenSize(c, IndexPath(path, i)))
		}
	}
	return w
}

func syntaxProblem(err error) *Problem {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Problem{Line: line, Msg: m[2]}
	}
	return &Problem{Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// expansion is the size of a node with its aliases expanded.
type expansion struct{ nodes, bytes int }

func (e expansion) tooLarge() bool { return e.nodes > MaxNodes || e.bytes > MaxBytes }

// expandedSize returns the size of n with aliases expanded, memoized per
// node so it takes time linear in the file; it saturates above the bounds.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]expansion) expansion {
	if n == nil {
		return expansion{}
	}
	if size, ok := memo[n]; ok {
		return size
	}
	memo[n] = expansion{MaxNodes + 1, MaxBytes + 1} // an alias cycle counts as too large
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
	size.nodes, size.bytes = min(size.nodes, MaxNodes+1), min(size.bytes, MaxBytes+1)
	memo[n] = size
	return size
}

// MappingValue returns the value of key in mapping n, aliases resolved, or
// nil.
func MappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return ResolveAlias(n.Content[i+1])
		}
	}
	return nil
}

// ResolveAlias returns the node an alias stands for (n itself when it is no
// alias).
func ResolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// ParentPath returns "a.b" for "a.b.c" and "a.b[2]", and "" for "a".
func ParentPath(path string) string {
	if i := strings.LastIndexByte(path, '['); i >= 0 && strings.HasSuffix(path, "]") {
		return path[:i]
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// JoinPath returns the path of key in the mapping at path.
func JoinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// IndexPath returns the path of item i of the list at path.
func IndexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Describe names a node's kind for messages: "a mapping", "a list" or the
// quoted scalar.
func Describe(n *yaml.Node) string {
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
