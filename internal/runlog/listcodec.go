package runlog

import (
	"fmt"
	"strconv"
	"time"
)

// A runtime schedule's history list (history_add_list.lua) holds its
// entries in a short form: there may be a million lists, and a field name
// is written in every entry. Each field name the writer uses has a one
// letter name in the list, and a tick is its unix ms when that says it
// exactly; parseListEntry reads both forms back to the stream's (a list
// written before the short form reads as it was).
var (
	shortNames = map[string]string{
		"ev": "e", "tick": "t", "run": "r", "replica": "w", "attempt": "a", "status": "s",
		"fence": "f", "took_ms": "d", "by": "b", "exit_code": "x", "http_status": "h",
		"reason": "y", "output": "o", "manual": "m", "backfill": "k",
	}
	longNames = func() map[string]string {
		m := make(map[string]string, len(shortNames))
		for long, short := range shortNames {
			m[short] = long
		}
		return m
	}()
)

// shortFields returns fields (name, value, ...) in the list's short form.
func shortFields(fields []any) []any {
	out := make([]any, len(fields))
	for i := 0; i+1 < len(fields); i += 2 {
		name, _ := fields[i].(string)
		out[i], out[i+1] = name, fields[i+1]
		if s, ok := shortNames[name]; ok {
			out[i] = s
		}
		if name == "tick" {
			out[i+1] = shortTick(fields[i+1])
		}
	}
	return out
}

// shortTick is tick value v as unix ms when that reads back the same text,
// else v.
func shortTick(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixMilli() < 0 || t.UTC().Format(time.RFC3339Nano) != s || t.UnixMilli()*int64(time.Millisecond) != t.UnixNano() {
		return v // a tick before 1970 keeps its text: the reader takes digits only
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// longField is a list entry's field name and value as the stream has them.
func longField(name, value string) (string, string) {
	long, ok := longNames[name]
	if !ok {
		return name, value
	}
	if long == "tick" && digits(value) {
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return long, fmt.Sprintf("(tick %s out of range)", value)
		}
		value = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	return long, value
}
