package strictyaml

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// sameTree tells where two node trees differ (Column aside: errors name
// lines only), "" when they do not.
func sameTree(a, b *yaml.Node, path string) string {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Style != b.Style || a.Value != b.Value || a.Line != b.Line || len(a.Content) != len(b.Content) {
		return fmt.Sprintf("%s: JSON path {kind %v tag %q style %v value %q line %d, %d children}, YAML path {kind %v tag %q style %v value %q line %d, %d children}",
			path, a.Kind, a.Tag, a.Style, a.Value, a.Line, len(a.Content), b.Kind, b.Tag, b.Style, b.Value, b.Line, len(b.Content))
	}
	for i := range a.Content {
		if d := sameTree(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// ParseJSON gives the tree Parse gives, for every kind of JSON value a
// definition may hold; whatever it does not take (several lines, a
// repeated key, trailing data, not an object, invalid) it leaves to Parse.
func TestParseJSONIsParse(t *testing.T) {
	docs := []string{
		`{}`,
		`{"schedule":"@every 1h","handler":{"name":"tick","payload":{"tenant":42}}}`,
		`{"a":1,"b":-2,"c":1.5,"d":1e3,"e":-0,"f":0.0,"g":99999999999999999999,"h":18446744073709551615,"i":-9223372036854775808}`,
		`{"t":true,"f":false,"n":null,"s":"","u":"e x","q":"yes","r":"1","o":"null","m":"<<"}`,
		`{"l":[],"l2":[1,"a",[true,{"k":[null]}]],"o":{"p":{"q":{}}}}`,
		`{"http":{"url":"https://hooks.internal/t/1?x=1&y=2","headers":{"X-A":"b: c"},"expect_status":[200,204]}}`,
		`  {"lead":"and trailing space"}  `,
		`{"lt":"<&>","sp":" ~"}`,
	}
	for _, d := range docs {
		j, ok := ParseJSON([]byte(d))
		if !ok {
			t.Fatalf("%s: not taken", d)
		}
		y, p := Parse([]byte(d), "a doc")
		if p != nil {
			t.Fatalf("%s: Parse: %v", d, p.Msg)
		}
		if diff := sameTree(j, y, ""); diff != "" {
			t.Errorf("%s: %s", d, diff)
		}
	}
	for _, d := range []string{`{"e":"é"}`, `{"e":"\ud83d\ude00"}`, `{"s":"a\/b"}`, `{"s":"\n"}`, `{"a":1,"a":2}`, "{\"a\":\n1}", `{"a":1} {}`, `[1]`, `"s"`, `{"a":}`, `{"a":1`, `{'a':1}`, ``} {
		if _, ok := ParseJSON([]byte(d)); ok {
			t.Errorf("%q: taken, want it left to Parse", d)
		}
	}
}

// Whatever one-line JSON object ParseJSON takes, Parse reads as the same
// tree.
func FuzzParseJSONIsParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,"x",true,null,{"b":{}}]}`, `{"n":-0,"m":1e-3,"k":"<<"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, d string) {
		j, ok := ParseJSON([]byte(d))
		if !ok {
			return
		}
		y, p := Parse([]byte(d), "a doc")
		if p != nil {
			t.Fatalf("%q: taken as JSON, but Parse says %s", d, p.Msg)
		}
		if diff := sameTree(j, y, ""); diff != "" {
			t.Fatalf("%q: %s", d, diff)
		}
	})
}

// Whatever ParseJSON takes, Parse reads as the same tree, for the
// characters and numbers where JSON and YAML part: ParseJSON leaves those
// documents to Parse.
func TestParseJSONTakesOnlyWhatParseReadsAlike(t *testing.T) {
	docs := []string{
		`{"a":1e400}`,                             // out of float64's range: YAML resolves !!str
		"{\"a\":\"x\u0085y\"}",                    // NEL: a line break to YAML, folded to a space
		"{\"a\":\"x\x7fy\"}",                      // DEL: refused by YAML
		"{\"a\":\"x\u0080y\"}",                    // C1 control: refused by YAML
		"{\"a\":\"\ufffe\"}",                      // non-character: refused by YAML
		"{\"a\":\"x\xffy\"}",                      // invalid UTF-8: refused by YAML
		"\u00a0{\"a\":1}",                         // NBSP before the object
		"{\"a\":1}\u00a0",                         // NBSP after it
		`{"` + strings.Repeat("k", 1100) + `":1}`, // a key past YAML's 1024-character simple key
	}
	for _, d := range docs {
		j, ok := ParseJSON([]byte(d))
		if !ok {
			continue
		}
		y, p := Parse([]byte(d), "a doc")
		switch {
		case p != nil:
			t.Errorf("%.40q: ParseJSON takes it, Parse refuses it: %s", d, p.Msg)
		case y == nil:
			t.Errorf("%.40q: ParseJSON takes it, Parse reads nothing", d)
		default:
			if diff := sameTree(j, y, ""); diff != "" {
				t.Errorf("%.40q: %s", d, diff)
			}
		}
	}
}
