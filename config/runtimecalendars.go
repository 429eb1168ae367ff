package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/strictyaml"
)

// Calendars put at runtime: named sets of days kept beside the runtime
// schedules (in their store, followed as they are), which runtime
// schedules name in exclude and only as they name the job list's.

// MaxCalendarDocument bounds the definition of a calendar put at runtime,
// in bytes: about 18,000 dates.
const MaxCalendarDocument = 256 << 10

// CheckCalendarName returns why name cannot name a calendar, or nil.
func CheckCalendarName(name string) error {
	if !jobNameRE.MatchString(name) {
		return fmt.Errorf("invalid calendar name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", name)
	}
	return nil
}

// DecodeCalendar reads the definition of the calendar name put at runtime:
// a YAML or JSON mapping with the keys of a calendar of the job list
// (dates, ranges, weekdays) but file (a replica reads no file a caller
// names: put its dates). It returns the calendar with its days built, and
// its definition as stored (compact JSON, the keys in a fixed order).
// The error is an *Error whose FieldErrors name calendars.NAME, the field
// and the line in doc.
func DecodeCalendar(name string, doc []byte) (*CalendarSpec, json.RawMessage, error) {
	p := "calendars." + name
	fail := func(field, format string, args ...any) error {
		return &Error{Errors: []FieldError{{Field: field, Msg: fmt.Sprintf(format, args...)}}}
	}
	if err := CheckCalendarName(name); err != nil {
		return nil, nil, fail("name", "%s", err.Error())
	}
	if len(doc) > MaxCalendarDocument {
		return nil, nil, fail(p, "the definition is %d bytes, more than %d: split it into calendars a schedule names together (exclude: [a, b])", len(doc), MaxCalendarDocument)
	}
	root, ok := strictyaml.ParseJSON(doc)
	var problem *strictyaml.Problem
	if !ok {
		root, problem = strictyaml.Parse(doc, "a calendar definition")
	}
	if problem == nil {
		problem = strictyaml.Bound(root)
	}
	if problem != nil {
		field := p
		if problem.Path != "" {
			field += "." + problem.Path
		}
		return nil, nil, &Error{Errors: []FieldError{{Line: problem.Line, Field: field, Msg: problem.Msg}}}
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, fail(p, "a calendar is a mapping of dates, ranges and weekdays, not %s", strictyaml.Describe(root))
	}
	d := &decoder{
		lookup:   func(string) (string, bool) { return "", false },
		expanded: map[*yaml.Node]bool{},
		emptyVar: map[*yaml.Node]string{},
		jobNames: map[int]string{},
		fromEnv:  map[string]envValue{},
	}
	d.Report = d.report
	d.Absent = d.absent
	// decoded as the one calendar of a job list, so that every message
	// names the calendar and its field as the job list's do
	wrapper := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "calendars"}, {Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, root,
		}},
	}}
	var list struct {
		Calendars map[string]*CalendarSpec `yaml:"calendars"`
	}
	d.Decode(wrapper, &list)
	c := list.Calendars[name]
	v := &validator{decoder: d, cfg: &Config{}, runtime: true}
	if c != nil && c.File != "" {
		v.errf(p+".file", "not in a calendar put at runtime (a replica reads no file a caller names): put its dates and ranges (baton calendars put %s --file F reads them from a file)", name)
		c.File = ""
	}
	if len(d.errs) == 0 {
		v.calendar(p, name, c)
	}
	if len(d.errs) > 0 {
		for i := range d.errs {
			d.errs[i].File = ""
		}
		return nil, nil, &Error{Errors: d.errs}
	}
	stored, err := json.Marshal(struct {
		Dates    []string `json:"dates,omitempty"`
		Ranges   []string `json:"ranges,omitempty"`
		Weekdays []string `json:"weekdays,omitempty"`
	}{c.Dates, c.Ranges, c.Weekdays})
	if err != nil {
		return nil, nil, err
	}
	return c, stored, nil
}

// WithCalendars returns a copy of c whose runtime schedules (DecodeSchedule)
// may also name the calendars of extra, those put at runtime; the job
// list's calendar wins a name both have. c itself is unchanged.
func (c *Config) WithCalendars(extra map[string]*CalendarSpec) *Config {
	if len(extra) == 0 {
		return c
	}
	cp := *c
	cp.Calendars = make(map[string]*CalendarSpec, len(c.Calendars)+len(extra))
	maps.Copy(cp.Calendars, extra)
	maps.Copy(cp.Calendars, c.Calendars)
	return &cp
}

// ScheduleCalendars returns the calendars a runtime schedule's definition
// names (exclude and only), sorted, without duplicates; none when doc is
// not a definition (DecodeSchedule says what is wrong).
func ScheduleCalendars(doc []byte) []string {
	var names struct {
		Exclude []string `json:"exclude" yaml:"exclude"`
		Only    []string `json:"only" yaml:"only"`
	}
	// a stored definition is JSON; one being put may be YAML
	if json.Unmarshal(doc, &names) != nil && yaml.Unmarshal(doc, &names) != nil {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(names.Exclude, names.Only))))
}
