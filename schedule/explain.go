package schedule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/batonhq/baton/internal/nearest"
)

// A spec robfig/cron refuses is explained in words: which field, what it
// holds, what it takes, and the name probably meant ("day of week "Mnday":
// expected 0-7 or SUN-SAT (did you mean MON?)", "unknown descriptor
// "@evry" (did you mean @every?)"). The explanation wraps robfig/cron's
// error without repeating it.

// specError is an explained parse error.
type specError struct {
	msg   string
	cause error
}

func (e *specError) Error() string { return e.msg }
func (e *specError) Unwrap() error { return e.cause }

// cronField is one field of a cron spec: its name, range and names.
type cronField struct {
	name     string
	min, max int
	names    []string // by value from min
	extra    string   // what else it takes, for the message
}

var (
	secondField = cronField{name: "second", min: 0, max: 59}
	minuteField = cronField{name: "minute", min: 0, max: 59}
	hourField   = cronField{name: "hour", min: 0, max: 23}
	domField    = cronField{name: "day of month", min: 1, max: 31, extra: ", L"}
	monthField  = cronField{name: "month", min: 1, max: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowField = cronField{name: "day of week", min: 0, max: 7,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}, extra: ", DL or D#N"}
)

// descriptors are the descriptors a spec may be.
var descriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every"}

// explainSpec explains why robfig/cron refused spec (cause), or returns
// cause when it finds nothing clearer to say.
func explainSpec(spec string, cause error) error {
	f := strings.Fields(spec)
	if strings.HasPrefix(spec, "@") {
		msg := fmt.Sprintf("unknown descriptor %q: expected one of %s", f[0], strings.Join(descriptors, ", "))
		if near := nearest.Name(f[0], descriptors); near != "" {
			msg = fmt.Sprintf("unknown descriptor %q (did you mean %s?)", f[0], near)
		}
		return &specError{msg: msg, cause: cause}
	}
	var fields []cronField
	switch len(f) {
	case 5:
		fields = []cronField{minuteField, hourField, domField, monthField, dowField}
	case 6:
		fields = []cronField{secondField, minuteField, hourField, domField, monthField, dowField}
	default:
		return &specError{msg: fmt.Sprintf("%d fields: expected 5 (minute hour day-of-month month day-of-week), 6 (with seconds first) or a descriptor (@daily, @every 5m)", len(f)), cause: cause}
	}
	for i, field := range fields {
		if msg := field.check(f[i]); msg != "" {
			return &specError{msg: msg, cause: cause}
		}
	}
	return cause
}

// check says what is wrong with text as this field; "" when it finds
// nothing.
func (c cronField) check(text string) string {
	expected := fmt.Sprintf("expected %d-%d", c.min, c.max)
	if len(c.names) > 0 {
		expected += fmt.Sprintf(" or %s-%s", c.names[0], c.names[len(c.names)-1])
	}
	expected += c.extra + ", a range (a-b), a step (*/n) or a list (a,b)"
	bad := func(what string) string {
		msg := fmt.Sprintf("%s %q: %s", c.name, text, expected)
		if what != text {
			msg = fmt.Sprintf("%s %q: %q: %s", c.name, text, what, expected)
		}
		if near := c.meant(what); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		return msg
	}
	for part := range strings.SplitSeq(text, ",") {
		values, step, stepped := strings.Cut(part, "/")
		if stepped {
			if n, err := strconv.Atoi(step); err != nil || n < 1 {
				return fmt.Sprintf("%s %q: step %q: expected a whole number of at least 1", c.name, text, step)
			}
		}
		if values == "*" || values == "?" {
			continue
		}
		for v := range strings.SplitSeq(values, "-") {
			if !c.takes(v) {
				return bad(v)
			}
		}
	}
	return ""
}

// meant is the name of the field that typed was probably meant to be: the
// nearest of its names or of their long forms (Monday, January); "" when
// none is near.
func (c cronField) meant(typed string) string {
	if len(c.names) == 0 {
		return ""
	}
	u := strings.ToUpper(typed)
	if near := nearest.Name(u, c.names); near != "" {
		return near
	}
	long := longNames[c.name]
	if near := nearest.Name(u, long); near != "" {
		return near[:3]
	}
	return ""
}

// longNames are the long forms of the fields' names, for did-you-mean.
var longNames = map[string][]string{
	"month":       {"JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST", "SEPTEMBER", "OCTOBER", "NOVEMBER", "DECEMBER"},
	"day of week": {"SUNDAY", "MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY"},
}

// takes tells whether v is a value of the field, or of its special forms
// (L, DL, D#N), which calendar.go checks closer.
func (c cronField) takes(v string) bool {
	if n, err := strconv.Atoi(v); err == nil {
		return n >= c.min && n <= c.max
	}
	u := strings.ToUpper(v)
	for _, name := range c.names {
		if u == name {
			return true
		}
	}
	switch c.name {
	case domField.name:
		return u == "L"
	case dowField.name:
		day, _, _ := strings.Cut(strings.TrimSuffix(u, "L"), "#")
		return u == "L" || day != u && (day == "" || c.takes(day))
	}
	return false
}
