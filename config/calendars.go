package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/schedule"
)

// CalendarSpec is a named set of days (Config.Calendars) that jobs exclude
// (Job.Exclude: "not on public holidays") or run only on (Job.Only: "on
// business days"). A day is in it when it is one of Dates, within one of
// Ranges, one of Weekdays, or listed in File; days are read by their date
// in each job's zone.
type CalendarSpec struct {
	// Dates are days, YYYY-MM-DD.
	Dates []string `yaml:"dates"`
	// Ranges are runs of days, FROM..TO (YYYY-MM-DD..YYYY-MM-DD, both
	// included).
	Ranges []string `yaml:"ranges"`
	// Weekdays are days of every week: mon ... sun (or monday ... sunday).
	Weekdays []string `yaml:"weekdays"`
	// File lists more dates and ranges, one per line ("#" starts a comment),
	// for a long list; a relative path is read from the config file's
	// directory.
	File string `yaml:"file"`
	// Calendar is the set of days, built by Load.
	Calendar *schedule.Calendar `yaml:"-"`
	// Path is File as read (beside the config file), set by Load.
	Path string `yaml:"-"`
}

// CalendarFiles are the paths of the calendar files the config read, in
// the calendars' name order: what a reload reads again beside the config.
func (c *Config) CalendarFiles() []string {
	names := make([]string, 0, len(c.Calendars))
	for n, cs := range c.Calendars {
		if cs != nil && cs.Path != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = c.Calendars[n].Path
	}
	return out
}

// JobDefinition is job j as its definition is compared between replicas
// and reloads: RedactedJob, the days of the calendars it names and the
// size of its limit (a calendar whose days differ, or a limit of another
// size, makes the job differ; a job without either compares as
// RedactedJob).
func (c *Config) JobDefinition(j *Job) string {
	def := c.RedactedJob(j)
	for _, name := range slices.Concat(j.Exclude, j.Only) {
		if cal := c.calendarOf(j, name); cal != nil {
			def += "\ncalendar " + name + ": " + cal.String()
		}
	}
	return def + c.limitLine(j)
}

// calendarCheckFrom is where Load looks for a job's first tick on the days
// its calendars leave (within 41 years), as schedule.Parse does for a spec.
var calendarCheckFrom = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// maxCalendarFile bounds a calendar file's size.
const maxCalendarFile = 1 << 20

var weekdayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// calendars checks the named calendars and builds their sets of days.
func (v *validator) calendars() {
	names := make([]string, 0, len(v.cfg.Calendars))
	for name := range v.cfg.Calendars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v.calendar("calendars."+name, name, v.cfg.Calendars[name])
	}
}

// calendar checks calendar c, named name at path p, and builds its set of
// days (c.Calendar).
func (v *validator) calendar(p, name string, c *CalendarSpec) {
	if !jobNameRE.MatchString(name) {
		v.errf(p, "invalid calendar name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", name)
		return
	}
	if c == nil {
		v.errf(p, "empty: give dates, ranges, weekdays or a file")
		return
	}
	cal := &schedule.Calendar{}
	for i, d := range c.Dates {
		if err := addDay(cal, d); err != nil {
			v.errf(fmt.Sprintf("%s.dates[%d]", p, i), "%s", err.Error())
		}
	}
	for i, r := range c.Ranges {
		if err := addDay(cal, r); err != nil || !strings.Contains(r, "..") {
			if err == nil {
				err = fmt.Errorf("%q: want FROM..TO, two dates such as 2026-12-24..2026-12-26", r)
			}
			v.errf(fmt.Sprintf("%s.ranges[%d]", p, i), "%s", err.Error())
		}
	}
	for i, w := range c.Weekdays {
		d, ok := weekdayNames[strings.ToLower(strings.TrimSpace(w))]
		if !ok {
			v.errf(fmt.Sprintf("%s.weekdays[%d]", p, i), "%q is no weekday: write mon, tue, wed, thu, fri, sat or sun", w)
			continue
		}
		cal.AddWeekday(d)
	}
	if c.File != "" {
		if err := v.calendarFile(cal, c.File); err != nil {
			v.errf(p+".file", "%s", err.Error())
		}
		c.Path = v.calendarPath(c.File)
	}
	if len(c.Dates)+len(c.Ranges)+len(c.Weekdays) == 0 && c.File == "" {
		v.errf(p, "empty: give dates, ranges, weekdays or a file")
	}
	c.Calendar = cal
}

// addDay adds a date (YYYY-MM-DD) or a range (FROM..TO) to cal.
func addDay(cal *schedule.Calendar, s string) error {
	s = strings.TrimSpace(s)
	if from, to, ok := strings.Cut(s, ".."); ok {
		a, err1 := time.Parse(time.DateOnly, strings.TrimSpace(from))
		b, err2 := time.Parse(time.DateOnly, strings.TrimSpace(to))
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%q: want FROM..TO, two dates such as 2026-12-24..2026-12-26", s)
		}
		if err := cal.AddRange(a, b); err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		return nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return fmt.Errorf("%q is no date: want YYYY-MM-DD, such as 2026-12-25", s)
	}
	cal.AddDate(d)
	return nil
}

// calendarFile adds the dates and ranges of a calendar file to cal; an
// error names the file and the line.
func (v *validator) calendarFile(cal *schedule.Calendar, name string) error {
	path := v.calendarPath(name)
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("cannot read %s: %w", path, err)
	case st.Size() > maxCalendarFile:
		return fmt.Errorf("%s is %d bytes, over the limit of %d", path, st.Size(), maxCalendarFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := addDay(cal, line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return nil
}

// calendarPath is where a calendar file named name is read: beside the
// config file when relative.
func (v *validator) calendarPath(name string) string {
	if !filepath.IsAbs(name) && v.cfg.File != "" {
		return filepath.Join(filepath.Dir(v.cfg.File), name)
	}
	return name
}

// jobDays checks a job's exclude and only lists and returns the days its
// ticks may fall on; ok is false when they name no calendar.
func (v *validator) jobDays(p string, j *Job) (schedule.Days, bool) {
	var days schedule.Days
	for _, l := range []struct {
		key   string
		names []string
		into  *[]*schedule.Calendar
	}{{"exclude", j.Exclude, &days.Exclude}, {"only", j.Only, &days.Only}} {
		for i, name := range l.names {
			c, ok := v.cfg.Calendars[name]
			if !ok {
				v.errf(fmt.Sprintf("%s.%s[%d]", p, l.key, i), "no calendar %q%s", name, v.knownCalendars())
				continue
			}
			if c != nil && c.Calendar != nil {
				*l.into = append(*l.into, c.Calendar)
				if j.Calendars == nil {
					j.Calendars = map[string]*schedule.Calendar{}
				}
				j.Calendars[name] = c.Calendar
			}
		}
	}
	return days, len(j.Exclude)+len(j.Only) > 0
}

// knownCalendars is ": the calendars are a, b" for an error, or ": the
// config defines none (calendars: at the top level)".
func (v *validator) knownCalendars() string {
	known := knownNames("calendars", v.cfg.Calendars, "")
	if v.runtime {
		known += "; a runtime schedule may also name a calendar put at runtime (baton calendars put)"
	}
	return known
}

// knownNames is ": the KIND are a, b" (m's names, sorted) for an error
// naming something m lacks, or ": the config defines none (KIND: at the
// top level, such as EXAMPLE)".
func knownNames[V any](kind string, m map[string]V, example string) string {
	if len(m) == 0 {
		if example != "" {
			example = ", such as " + example
		}
		return ": the config defines none (" + kind + ": at the top level" + example + ")"
	}
	return ": the " + kind + " are " + strings.Join(slices.Sorted(mapKeys(m)), ", ")
}

// ExcludedBy says why j's calendars leave out a tick at t of its spec:
// "holidays" for a day of an exclude calendar, "not in business-days" for
// a day missing from an only calendar; "" when they let it be.
func (c *Config) ExcludedBy(j *Job, t time.Time) string {
	local := t.In(j.Location)
	var why []string
	for _, name := range j.Exclude {
		if cal := c.calendarOf(j, name); cal != nil && cal.Contains(local) {
			why = append(why, name)
		}
	}
	for _, name := range j.Only {
		if cal := c.calendarOf(j, name); cal != nil && !cal.Contains(local) {
			why = append(why, "not in "+name)
		}
	}
	return strings.Join(why, ", ")
}

// calendarOf is the calendar name as job j was decoded with it
// (Job.Calendars: a runtime schedule's may be one put at runtime), else
// the config's.
func (c *Config) calendarOf(j *Job, name string) *schedule.Calendar {
	if cal := j.Calendars[name]; cal != nil {
		return cal
	}
	if cs := c.Calendars[name]; cs != nil {
		return cs.Calendar
	}
	return nil
}
