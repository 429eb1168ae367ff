package strictyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"gopkg.in/yaml.v3"
)

// ParseJSON returns the node tree yaml.v3 parses from data, a JSON object
// on one line (a stored runtime schedule's definition), without yaml.v3's
// parser, which takes most of a replica's time to read a million of them:
// each string a double-quoted !!str, each number an !!int (or !!float, as
// yaml.v3 resolves it), true and false !!bool, null !!null, objects and
// arrays flow-style mappings and sequences, everything on line 1. ok is
// false, and the caller parses data as YAML (for its messages), when data
// is not one such object in printable ASCII without a backslash (JSON's
// escapes are not all YAML's, and YAML refuses or folds some characters
// JSON takes raw: DEL, C1 controls, NEL, U+FFFE, invalid UTF-8), or is
// invalid, has a repeated key or a key past YAML's 1,024 characters, a
// number YAML reads as a string (out of float64's range), or anything
// after the object. TestParseJSONIsParse pins
// it to Parse.
func ParseJSON(data []byte) (root *yaml.Node, ok bool) {
	data = bytes.Trim(data, " ")
	if len(data) == 0 || data[0] != '{' || !plainASCII(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonNode(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return n, true
}

var errRepeated = errors.New("a repeated key")

// plainASCII tells whether data holds printable ASCII only (space to ~),
// without a backslash.
func plainASCII(data []byte) bool {
	for _, c := range data {
		if c < ' ' || c > '~' || c == '\\' {
			return false
		}
	}
	return true
}

// maxKey is the longest key ParseJSON takes: yaml.v3 refuses a simple key
// of more than 1,024 characters.
const maxKey = 1000

// jsonNode reads one value from dec as the node yaml.v3 makes of it.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	col := int(dec.InputOffset()) + 1
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Line: 1, Column: col}
			seen := map[string]bool{}
			for dec.More() {
				kcol := int(dec.InputOffset()) + 1
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				if seen[key] || len(key) > maxKey {
					return nil, errRepeated
				}
				seen[key] = true
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: key, Line: 1, Column: kcol}, v)
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Line: 1, Column: col}
			for dec.More() {
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, errors.New("unexpected delimiter")
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: t, Line: 1, Column: col}, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(t), 64); err != nil {
			return nil, err // out of range: YAML reads it as a string
		}
		tag := "!!float"
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			tag = "!!int"
		} else if _, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: 1, Column: col}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: 1, Column: col}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: 1, Column: col}, nil
	}
	return nil, errors.New("unexpected token")
}
