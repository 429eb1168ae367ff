package strictyaml

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Encode turns a value into YAML the way a Decoder reads it: keys from
// yaml tags, durations as Go duration strings (1m rather than 1m0s),
// json.RawMessage values as YAML. Nil pointers,
// nil maps and slices and empty strings give nil (left out).
func Encode(v reflect.Value) *yaml.Node {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String:
		if v.IsZero() {
			return nil
		}
	}
	switch t := v.Type(); {
	case t == durationType:
		return ScalarNode(FormatDuration(time.Duration(v.Int())))
	case t == rawMessageType:
		var x any
		if err := json.Unmarshal(v.Bytes(), &x); err != nil {
			return nil
		}
		var n yaml.Node
		if err := n.Encode(x); err != nil {
			return nil
		}
		return &n
	}
	switch v.Kind() {
	case reflect.Pointer:
		return Encode(v.Elem())
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if c := Encode(v.Field(i)); c != nil {
				n.Content = append(n.Content, ScalarNode(name), c)
			}
		}
		if len(n.Content) == 0 {
			return nil
		}
		return n
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			c := Encode(v.Index(i))
			if c == nil {
				c = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
			}
			n.Content = append(n.Content, c)
		}
		if v.Type().Elem().Kind() != reflect.Struct {
			n.Style = yaml.FlowStyle
		}
		return n
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			switch {
			case a.String() < b.String():
				return -1
			case a.String() > b.String():
				return 1
			}
			return 0
		})
		for _, k := range keys {
			c := Encode(v.MapIndex(k))
			if c == nil {
				c = &yaml.Node{}
				_ = c.Encode(v.MapIndex(k).Interface())
			}
			n.Content = append(n.Content, ScalarNode(k.String()), c)
		}
		return n
	}
	var n yaml.Node
	if err := n.Encode(v.Interface()); err != nil {
		return nil
	}
	return &n
}

// FormatDuration is Duration.String without zero minutes and seconds at the
// end: 1m rather than 1m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ScalarNode returns a node that encodes s.
func ScalarNode(s string) *yaml.Node {
	var n yaml.Node
	_ = n.Encode(s)
	return &n
}
