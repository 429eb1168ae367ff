package runlog

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/formats"
)

// A runtime schedule's history list (history_add_list.lua) holds its
// entries in a short form: there may be a million lists, and every byte of
// an element is kept once per run. An element is "<ms>-<seq> " and a JSON
// array of field, value pairs (the stream's fields), where
//   - each field name the writer uses has a one letter name;
//   - "v" is left out: an element without it is version 1 of the history
//     event (formats.HistoryEvent), in this form;
//   - the event is one letter (started S, dispatched D, not_run N), and a
//     run's end (finished), the most of a list, has none, nor its status
//     when it is "ok";
//   - the tick, when its unix ms says it exactly, is written by the script
//     as the element's own ms less the tick's (a few digits: how long after
//     its tick the event came), else as its text;
//   - a run id of runid.New's form (32 hex digits) is its 16 bytes in
//     base64url, named "R" (22 characters: a field of every element);
//   - attempt 1 is left out, and so is the replica that dispatched the tick
//     ("by") when it is the one that ran it ("replica").
//
// parseListEntry reads every form back to the stream's fields, and also an
// element of the earlier short form, which starts "v" and holds the tick in
// unix ms and every field.
var (
	shortNames = map[string]string{
		"ev": "e", "tick": "t", "run": "r", "replica": "w", "attempt": "a", "status": "s",
		"fence": "f", "took_ms": "d", "by": "b", "exit_code": "x", "http_status": "h",
		"reason": "y", "output": "o", "manual": "m", "backfill": "k",
		"kept": "L", // a run's end kept beyond the count as the last success (the script marks it)
	}
	longNames  = invert(shortNames)
	shortEvent = map[string]string{EvStarted: "S", EvDispatched: "D", EvNotRun: "N"}
	longEvent  = invert(shortEvent)
)

func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// shortFields returns fields (name, value, ...), the first "v", in the
// list's short form. The script writes the tick (see above).
func shortFields(fields []any) []any {
	get := func(name string) (any, bool) {
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i] == name {
				return fields[i+1], true
			}
		}
		return nil, false
	}
	replica, hasReplica := get("replica")
	ev, _ := get("ev")
	end := ev == EvFinished
	out := make([]any, 0, len(fields))
	for i := 0; i+1 < len(fields); i += 2 {
		name, _ := fields[i].(string)
		v := fields[i+1]
		switch {
		case name == "v" && fmt.Sprint(v) == strconv.Itoa(formats.HistoryEvent):
			continue
		case name == "attempt" && fmt.Sprint(v) == "1":
			continue
		case name == "by" && hasReplica && fmt.Sprint(v) == fmt.Sprint(replica):
			continue
		case name == "ev" && end:
			continue
		case name == "status" && end && fmt.Sprint(v) == "ok":
			continue
		case name == "ev":
			if e, ok := shortEvent[fmt.Sprint(v)]; ok {
				v = e
			}
		case name == "tick":
			v = shortTick(v)
		case name == "run":
			if b, ok := hexRunID(v); ok {
				out = append(out, "R", base64.RawURLEncoding.EncodeToString(b))
				continue
			}
		}
		if s, ok := shortNames[name]; ok {
			name = s
		}
		out = append(out, name, v)
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
		return v // a tick before 1970 keeps its text: the script takes digits only
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// hexRunID is run id v's 16 bytes when it has runid.New's form.
func hexRunID(v any) ([]byte, bool) {
	s, ok := v.(string)
	if !ok || len(s) != 32 || strings.ToLower(s) != s {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// longFields is the fields of a list element written at ms, as the
// stream has them.
func longFields(fields []string, ms int64) map[string]any {
	vals := make(map[string]any, len(fields)/2+3)
	earlier := len(fields) > 0 && fields[0] == "v" // the earlier short form
	for i := 0; i+1 < len(fields); i += 2 {
		name, value := longField(fields[i], fields[i+1], earlier, ms)
		vals[name] = value
	}
	if earlier {
		return vals
	}
	if _, ok := vals["v"]; !ok { // a later release's element may say its own
		vals["v"] = strconv.Itoa(formats.HistoryEvent)
	}
	if _, ok := vals["ev"]; !ok {
		vals["ev"] = EvFinished
		if _, ok := vals["status"]; !ok {
			vals["status"] = "ok"
		}
	}
	ev := vals["ev"]
	if ev != EvStarted && ev != EvFinished {
		return vals
	}
	if _, ok := vals["attempt"]; !ok {
		vals["attempt"] = "1"
	}
	// a start always names who dispatched its tick, an end when it says how
	// long it ran (took_ms): left out, it was the replica that ran it
	_, took := vals["took_ms"]
	if _, ok := vals["by"]; !ok && (ev == EvStarted || took) {
		if r, ok := vals["replica"]; ok {
			vals["by"] = r
		}
	}
	return vals
}

// longField is a list element's field name and value as the stream has
// them; earlier: the element is of the earlier short form (the tick in unix
// ms), else of the current one (the tick as ms before ms, the event a
// letter).
func longField(name, value string, earlier bool, ms int64) (string, string) {
	if name == "R" && !earlier {
		b, err := base64.RawURLEncoding.DecodeString(value)
		if err != nil || len(b) != 16 {
			return "run", value
		}
		return "run", hex.EncodeToString(b)
	}
	long, ok := longNames[name]
	if !ok {
		return name, value
	}
	switch {
	case long == "tick" && earlier && digits(value):
		at, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return long, fmt.Sprintf("(tick %s out of range)", value)
		}
		value = time.UnixMilli(at).UTC().Format(time.RFC3339Nano)
	case long == "tick" && !earlier && digits(strings.TrimPrefix(value, "-")):
		ago, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return long, fmt.Sprintf("(tick %s ms before the entry out of range)", value)
		}
		value = time.UnixMilli(ms - ago).UTC().Format(time.RFC3339Nano)
	case long == "ev" && !earlier:
		if e, ok := longEvent[value]; ok {
			value = e
		}
	}
	return long, value
}
