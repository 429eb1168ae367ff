package baton

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/schedstore"
)

// Calendars put at runtime: named sets of days (as the job list's
// calendars:) that runtime schedules name in exclude and only. They are
// kept in the store of the runtime schedules and followed as the schedules
// are (signed, restored when Redis goes back); a change of a calendar
// reaches every schedule that names it within a second.

// ErrNoCalendar is returned for a runtime calendar that does not exist.
var ErrNoCalendar = errors.New("baton: no such runtime calendar")

// ErrCalendarInUse is returned by DeleteCalendar for a calendar runtime
// schedules name: delete them, or change what they name, first.
var ErrCalendarInUse = errors.New("baton: runtime schedules name the calendar")

// CalendarSpec is a calendar's definition: its days, as the job list
// writes them (config.CalendarSpec but file).
type CalendarSpec struct {
	Dates    []string `json:"dates,omitempty"`    // YYYY-MM-DD
	Ranges   []string `json:"ranges,omitempty"`   // FROM..TO, both included
	Weekdays []string `json:"weekdays,omitempty"` // mon ... sun
}

// Calendar is a stored runtime calendar.
type Calendar struct {
	Name       string          `json:"name"`
	Definition json.RawMessage `json:"definition"` // dates, ranges, weekdays
	Created    time.Time       `json:"created"`
	Updated    time.Time       `json:"updated"`
	Version    int64           `json:"version"` // 1 when first put, one more with each change
	// Change is the change of the store's shard that put it: a replica
	// whose ScheduleChange of its id ("~calendar/" + name) reached it
	// follows this calendar or a newer one.
	Change int64 `json:"change"`
	// Error says why replicas refuse the stored calendar (and the
	// schedules that name it); a listing gives such calendars too.
	Error string `json:"error,omitempty"`
}

// CalendarPage is one page of a listing of the runtime calendars.
type CalendarPage struct {
	Calendars []Calendar `json:"calendars"`
	Next      string     `json:"next,omitempty"` // the after of the next page; "" after the last
}

// PutCalendar creates or replaces runtime calendar name. A name of the job
// list's calendars is refused (the job list's would stand for it). Every
// running replica follows within a second, and decodes again the
// schedules that name it.
func (c *Cluster) PutCalendar(ctx context.Context, name string, spec CalendarSpec) (Calendar, error) {
	doc, err := json.Marshal(spec)
	if err != nil {
		return Calendar{}, err
	}
	return c.PutCalendarDocument(ctx, name, doc)
}

// PutCalendarDocument is PutCalendar with the definition as YAML or JSON
// (dates, ranges, weekdays).
func (c *Cluster) PutCalendarDocument(ctx context.Context, name string, doc []byte) (Calendar, error) {
	if _, ok := c.cfg.Calendars[name]; ok {
		return Calendar{}, &config.Error{Errors: []config.FieldError{{Field: "calendars." + name,
			Msg: "the job list defines a calendar of this name (calendars: in the config file), which runtime schedules naming it read: change it there, or put this one under another name"}}}
	}
	_, stored, err := config.DecodeCalendar(name, doc)
	if err != nil {
		return Calendar{}, err
	}
	st, err := c.writableStore(ctx)
	if err != nil {
		return Calendar{}, err
	}
	rec, err := st.Put(ctx, schedstore.CalendarID(name), stored, schedstore.Any)
	if err != nil {
		return Calendar{}, err
	}
	return calendarOf(rec), nil
}

// GetCalendar returns runtime calendar name, or ErrNoCalendar.
func (c *Cluster) GetCalendar(ctx context.Context, name string) (Calendar, error) {
	if err := config.CheckCalendarName(name); err != nil {
		return Calendar{}, err
	}
	rec, err := c.scheduleStore().Get(ctx, schedstore.CalendarID(name))
	if errors.Is(err, schedstore.ErrNotFound) {
		return Calendar{}, fmt.Errorf("%w: %q", ErrNoCalendar, name)
	}
	if err != nil {
		return Calendar{}, err
	}
	return c.checkedCalendar(ctx, rec), nil
}

// ListCalendars returns a page of the runtime calendars, in name order,
// after the name after ("": from the first); limit 0 is 100, at most 1000.
func (c *Cluster) ListCalendars(ctx context.Context, after string, limit int) (CalendarPage, error) {
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return CalendarPage{}, fmt.Errorf("%w: limit %d: want 1 to 1000", ErrBadQuery, limit)
	}
	recs, bad, next, err := c.scheduleStore().ListCalendars(ctx, after, limit)
	if err != nil {
		return CalendarPage{}, err
	}
	page := CalendarPage{Next: next, Calendars: []Calendar{}}
	for _, r := range recs {
		page.Calendars = append(page.Calendars, c.checkedCalendar(ctx, r))
	}
	for _, id := range slices.Sorted(maps.Keys(bad)) {
		name, _ := schedstore.CalendarName(id)
		page.Calendars = append(page.Calendars, Calendar{Name: name, Error: bad[id].Error()})
	}
	slices.SortFunc(page.Calendars, func(a, b Calendar) int { return strings.Compare(a.Name, b.Name) })
	return page, nil
}

// DeleteCalendar removes runtime calendar name, unless runtime schedules
// name it (ErrCalendarInUse, naming some): a schedule whose calendar is
// gone is refused by every replica, its ticks not run. It reads every
// schedule's definition to find out. A schedule put while it reads may
// still name it: replicas refuse that one, and its listing says why (put
// the calendar again to run it). ErrNoCalendar when there was none.
func (c *Cluster) DeleteCalendar(ctx context.Context, name string) error {
	if err := config.CheckCalendarName(name); err != nil {
		return err
	}
	st, err := c.writableStore(ctx)
	if err != nil {
		return err
	}
	users, err := c.calendarUsers(ctx, name, 5)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("%w: %q is named by %s: delete them, or put them without it, first", ErrCalendarInUse, name, strings.Join(users, ", "))
	}
	ok, err := st.Delete(ctx, schedstore.CalendarID(name))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoCalendar, name)
	}
	return nil
}

// calendarUsers returns up to max ids of the runtime schedules that name
// calendar name ("…" after them when there are more).
func (c *Cluster) calendarUsers(ctx context.Context, name string, max int) ([]string, error) {
	var users []string
	after := ""
	for {
		recs, _, next, err := c.scheduleStore().List(ctx, "", after, 1000)
		if err != nil {
			return nil, err
		}
		quoted := []byte(strconv.Quote(name))
		for _, r := range recs {
			if bytes.Contains(r.Doc, quoted) && slices.Contains(config.ScheduleCalendars(r.Doc), name) {
				if len(users) == max {
					return append(users, "…"), nil
				}
				users = append(users, fmt.Sprintf("%q", r.ID))
			}
		}
		if next == "" {
			return users, nil
		}
		after = next
	}
}

// withCalendars returns the config the runtime schedules of docs (their
// definitions) are decoded with: c's, with the runtime calendars they name
// that the job list lacks, read from the store. A calendar that does not
// exist, or that replicas refuse, is left out (the decode names it).
func (c *Cluster) withCalendars(ctx context.Context, docs ...[]byte) (*config.Config, error) {
	return c.scheduleStore().WithCalendarsOf(ctx, c.cfg, nil, docs...)
}

// readableCalendars is withCalendars for a listing: the calendars that
// cannot be used are left out, their errors by name, so that only the
// schedules naming one of them say so.
func (c *Cluster) readableCalendars(ctx context.Context, docs ...[]byte) (*config.Config, map[string]error, error) {
	return c.scheduleStore().ReadableCalendarsOf(ctx, c.cfg, nil, docs...)
}

// checkedCalendar is r as a Calendar, with why the replicas refuse it
// when it is older than they saw (a copy put back).
func (c *Cluster) checkedCalendar(ctx context.Context, r schedstore.Record) Calendar {
	cal := calendarOf(r)
	if err := c.scheduleStore().Older(ctx, r); err != nil {
		cal.Error = err.Error()
	}
	return cal
}

func calendarOf(r schedstore.Record) Calendar {
	name, _ := schedstore.CalendarName(r.ID)
	return Calendar{Name: name, Definition: r.Doc, Created: r.Created, Updated: r.Updated, Version: r.Version, Change: r.Change}
}
