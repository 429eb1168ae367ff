package strictyaml_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/strictyaml"
)

type inner struct {
	Every time.Duration `yaml:"every"`
	Tags  []string      `yaml:"tags"`
}

type doc struct {
	Name    string            `yaml:"name"`
	Count   int               `yaml:"count"`
	On      bool              `yaml:"on"`
	Inner   inner             `yaml:"inner"`
	Env     map[string]string `yaml:"env"`
	Payload json.RawMessage   `yaml:"payload"`
}

func decode(t *testing.T, src string) (doc, []strictyaml.Problem) {
	t.Helper()
	var got doc
	var problems []strictyaml.Problem
	root, p := strictyaml.Parse([]byte(src), "a test document")
	if p != nil {
		return got, []strictyaml.Problem{*p}
	}
	d := strictyaml.Decoder{Report: func(p strictyaml.Problem) { problems = append(problems, p) }, Extensions: true}
	d.Decode(root, &got)
	return got, problems
}

// Every problem of a document is reported with its line and path, and the
// walk goes on past each; a path that has a problem gets no second one.
func TestEveryProblemWithItsLine(t *testing.T) {
	_, problems := decode(t, "nmae: x\ncount: many\ninner:\n  every: 5\n  every: 6s\non: maybe\n")
	var got []string
	for _, p := range problems {
		got = append(got, fmt.Sprintf("%d %s: %s", p.Line, p.Path, p.Msg))
	}
	want := []string{
		`1 nmae: unknown field "nmae" (did you mean "name"?)`,
		`2 count: expected an integer, got "many"`,
		`5 inner.every: duplicate key (first at line 4)`,
		`6 on: expected true or false, got "maybe"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Aliases and merge keys work; explicit keys win over merged ones.
func TestAliasesAndMergeKeys(t *testing.T) {
	got, problems := decode(t, "x-base: &base {every: 1m, tags: [a, b]}\ninner:\n  <<: *base\n  every: 2m\nenv: {A: \"1\"}\npayload: {k: [1, two]}\n")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if got.Inner.Every != 2*time.Minute || !reflect.DeepEqual(got.Inner.Tags, []string{"a", "b"}) {
		t.Errorf("inner = %+v, want every 2m (explicit) and tags [a b] (merged)", got.Inner)
	}
	if string(got.Payload) != `{"k":[1,"two"]}` || got.Env["A"] != "1" {
		t.Errorf("payload %s, env %v", got.Payload, got.Env)
	}
}

// A small document whose aliases expand past the bound is refused before
// it is walked.
func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	root, p := strictyaml.Parse([]byte(b.String()), "a test document")
	if p != nil {
		t.Fatal(p)
	}
	if p := strictyaml.Bound(root); p == nil || !strings.Contains(p.Msg, "through aliases") {
		t.Fatalf("Bound = %v; want the expansion bound", p)
	}
}

// One document only, a mapping at the top.
func TestDocumentShape(t *testing.T) {
	for src, want := range map[string]string{
		"a: 1\n---\nb: 2\n": "a test document holds one YAML document; found another",
		"- a\n- b\n":        `the top level must be a mapping, got a list`,
		"a: [\n":            "did not find expected node content",
	} {
		_, p := strictyaml.Parse([]byte(src), "a test document")
		if p == nil || !strings.Contains(p.Msg, want) {
			t.Errorf("Parse(%q) = %v, want %q", src, p, want)
		}
	}
}

// Encode writes what Decode reads.
func TestEncodeRoundTrip(t *testing.T) {
	in := doc{Name: "n", Count: 3, On: true, Inner: inner{Every: 90 * time.Second, Tags: []string{"a"}},
		Env: map[string]string{"B": "2", "A": "1"}, Payload: json.RawMessage(`{"k":1}`)}
	out, err := yaml.Marshal(strictyaml.Encode(reflect.ValueOf(in)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "every: 1m30s") {
		t.Errorf("durations are written as Go durations:\n%s", out)
	}
	back, problems := decode(t, string(out))
	if len(problems) > 0 || !reflect.DeepEqual(back, in) {
		t.Errorf("round trip:\n%s\ngave %+v (%v), want %+v", out, back, problems, in)
	}
}

// A mapping of two million keys, no alias in sight, is refused naming
// that mapping, its line and its size, not aliases.
func TestLargeMappingNamedNotAliases(t *testing.T) {
	big := &yaml.Node{Kind: yaml.MappingNode, Line: 3}
	big.Content = make([]*yaml.Node, 4_000_000)
	scalar := &yaml.Node{Kind: yaml.ScalarNode, Value: "k"} // the size is all Bound looks at
	for i := range big.Content {
		big.Content[i] = scalar
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Line: 1, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "jobs"}, {Kind: yaml.SequenceNode, Line: 2},
		{Kind: yaml.ScalarNode, Value: "x-big"}, big,
	}}
	p := strictyaml.Bound(root)
	want := "a mapping of 2000000 keys: a document may hold at most 1000000 values (keys, list items and scalars), and this one holds 4000005 without counting aliases"
	if p == nil || p.Line != 3 || p.Path != "x-big" || p.Msg != want {
		t.Fatalf("Bound = %+v\nwant line 3, path x-big, %q", p, want)
	}
	if strings.Contains(p.Msg, "alias") && !strings.Contains(p.Msg, "without counting aliases") {
		t.Errorf("the message blames aliases: %s", p.Msg)
	}
}
