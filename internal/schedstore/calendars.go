package schedstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/batonhq/baton/config"
)

// Calendars put at runtime are kept in the store beside the schedules,
// each under an id of its own (CalendarID): put, signed, followed, marked
// and restored when Redis goes back as a schedule is. A Follower decodes
// them (config.DecodeCalendar) and decodes the schedules that name them
// with them (config.Config.WithCalendars); a change of a calendar decodes
// again every schedule that names it.

// calendarPrefix begins the id of a calendar: '~' begins no schedule id
// (config.CheckScheduleID), and sorts after every one, so that a listing
// of the schedules stops before the calendars.
const calendarPrefix = "~calendar/"

// CalendarID is the store's id of the calendar name.
func CalendarID(name string) string { return calendarPrefix + name }

// CalendarName is the name of the calendar stored under id, and whether
// id is a calendar's.
func CalendarName(id string) (string, bool) { return strings.CutPrefix(id, calendarPrefix) }

// ListCalendars returns up to limit calendars in name order, after the
// name after (exclusive; "" from the first); next is the after of the next
// page, "" after the last. Records that cannot be read come back in bad,
// by id.
func (s *Store) ListCalendars(ctx context.Context, after string, limit int) (recs []Record, bad map[string]error, next string, err error) {
	if after != "" {
		after = CalendarID(after)
	}
	recs, bad, next, err = s.list(ctx, calendarPrefix, after, limit, "")
	next, _ = CalendarName(next)
	return recs, bad, next, err
}

// putCalendars decodes the calendars of raws (stored values, by id) into
// the copy, or refuses them, and notes each for recheck. Under applyMu.
func (f *Follower) putCalendars(raws map[string]string) {
	for _, id := range slices.Sorted(maps.Keys(raws)) {
		raw := raws[id]
		name, _ := CalendarName(id)
		rec, err := f.st.parse(id, raw)
		var spec *config.CalendarSpec
		if err == nil {
			spec, _, err = config.DecodeCalendar(name, rec.Doc)
		}
		if err == nil {
			f.mu.RLock()
			err = f.older(rec)
			f.mu.RUnlock()
		}
		if err != nil {
			f.refuse(id, raw, err)
			continue
		}
		f.forgetRefusal(id)
		f.mu.Lock()
		f.byName[id] = entry{raw: raw, cal: spec, ref: rec.Ref(), bound: rec.Bound}
		if rec.Bound {
			f.raise(id, Mark{Created: rec.Created.UnixMilli(), Version: rec.Version})
		}
		f.cals[name] = spec
		f.calsBase = f.base.WithCalendars(f.cals)
		f.dirty = append(f.dirty, name)
		f.mu.Unlock()
	}
}

// dropCalendar takes calendar name out of the copy's calendars and notes
// it for recheck. Under f.mu.
func (f *Follower) dropCalendar(name string) {
	if _, ok := f.cals[name]; !ok {
		return
	}
	delete(f.cals, name)
	f.calsBase = f.base.WithCalendars(f.cals)
	f.dirty = append(f.dirty, name)
}

// recheck decodes again the schedules that depend on what changed since
// the last recheck: those that name a calendar that changed or went (with
// the copy's calendars), those that run after a schedule that changed or
// went (with its ticks as they are now: their children in turn, round
// after round), and the refused schedules that name calendars or parents
// (one may have named one that was not there yet). Under applyMu.
func (f *Follower) recheck(ctx context.Context) {
	for range maxRecheckRounds {
		f.mu.Lock()
		names := f.dirty
		f.dirty = nil
		f.mu.Unlock()
		if len(names) == 0 {
			return
		}
		raws := map[string]string{}
		f.mu.RLock()
		var cals []string
		for _, n := range names {
			if !config.IsScheduleJob(n) {
				cals = append(cals, n)
				continue
			}
			for child := range f.children[n] {
				if e, ok := f.byName[child]; ok && !f.fresh[child] {
					raws[idOf(child)] = e.raw
				}
			}
		}
		if len(cals) > 0 {
			for key, e := range f.byName {
				if e.job != nil && slices.ContainsFunc(cals, func(n string) bool {
					// decoded with another version of it, or without it
					return (slices.Contains(e.job.Exclude, n) || slices.Contains(e.job.Only, n)) && !f.decodedWith(e.job, n)
				}) {
					raws[idOf(key)] = e.raw
				}
			}
		}
		for id, raw := range f.refusedRaw {
			if _, isCal := CalendarName(id); !isCal && dependent(raw) {
				raws[id] = raw
			}
		}
		f.mu.RUnlock()
		if len(raws) == 0 {
			continue
		}
		f.log.Info("runtime calendars or parents changed: decoding the schedules that depend on them again", "changed", names, "schedules", len(raws))
		f.commit(ctx, f.changed(ctx, raws, true), nil)
	}
	f.log.Warn("runtime schedules: decoding the schedules that depend on others did not settle; the next resync does it again", "rounds", maxRecheckRounds)
}

// maxRecheckRounds bounds the rounds of a recheck: a chain of runtime
// schedules is at most config's depth bound long.
const maxRecheckRounds = 66

// refusedDependent tells whether a schedule the copy refuses names
// calendars or parents (dependent). Under f.mu.
func (f *Follower) refusedDependent() bool {
	for _, raw := range f.refusedRaw {
		if dependent(raw) {
			return true
		}
	}
	return false
}

// dependent tells whether a stored value's definition names calendars or
// parents, whose changes may change whether it decodes.
func dependent(raw string) bool {
	return strings.Contains(raw, `"exclude":`) || strings.Contains(raw, `"only":`) || strings.Contains(raw, `"after":`)
}

// missingCalendars are the calendars the definitions of recs name that
// neither the job list nor the copy holds (nor refuses), by name.
func (f *Follower) missingCalendars(recs []Record) []string {
	need := map[string]bool{}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, r := range recs {
		if !bytes.Contains(r.Doc, []byte(`"exclude"`)) && !bytes.Contains(r.Doc, []byte(`"only"`)) {
			continue
		}
		for _, n := range config.ScheduleCalendars(r.Doc) {
			_, refused := f.refused[CalendarID(n)]
			if f.base.Calendars[n] == nil && f.cals[n] == nil && !refused {
				need[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(need))
}

// fetchCalendars reads the calendars the schedules of recs name that the
// copy does not hold yet (put in another shard, whose changes this
// Follower reads apart) and puts them into the copy. Under applyMu.
func (f *Follower) fetchCalendars(ctx context.Context, recs []Record) {
	need := f.missingCalendars(recs)
	if len(need) == 0 {
		return
	}
	ids := make([]string, len(need))
	for i, n := range need {
		ids[i] = CalendarID(n)
	}
	got, bad, err := f.st.GetMany(ctx, ids)
	if err != nil {
		// the schedules that name them are refused, and decoded again
		// when their calendars are read
		f.log.Warn("cannot read the runtime calendars schedules name", "calendars", need, "err", err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(bad)) {
		// refused as its own shard's read refuses it: listed with why, its
		// stored value put back if Redis goes back
		raw, _ := f.st.rdb.HGet(ctx, f.st.keysOf(id).defs, id).Result()
		f.refuse(id, raw, bad[id])
	}
	raws := map[string]string{}
	for id, r := range got {
		raws[id] = r.raw
	}
	f.putCalendars(raws)
}

// decode decodes the job of rec, read outside the copy (ScheduleJob), with
// the copy's calendars and those it names that the copy does not hold,
// and the parents it runs after from the copy or else Redis (the copy is
// left as it is).
func (f *Follower) decode(ctx context.Context, rec Record) (*config.Job, error) {
	return f.decodeWith(ctx, rec, &fetchSource{ctx: ctx, f: f, visiting: map[string]bool{config.ScheduleJobName(rec.ID): true}, decoded: map[string]*config.Job{}})
}

func (f *Follower) decodeWith(ctx context.Context, rec Record, src *fetchSource) (*config.Job, error) {
	f.mu.RLock()
	base := f.calsBase.WithSource(src)
	f.mu.RUnlock()
	base, err := f.st.WithCalendarsOf(ctx, base, f.olderFetched, rec.Doc)
	if err != nil {
		return nil, err
	}
	return rec.Job(base)
}

// fetchSource finds the parents of a schedule decoded outside the copy: in
// the copy, else read from Redis and decoded in turn, once each (an
// ancestor two parents share is read once); never one whose decode is
// under way further down the same path (a cycle finds no parent).
type fetchSource struct {
	ctx      context.Context
	f        *Follower
	visiting map[string]bool        // the path being decoded
	decoded  map[string]*config.Job // read and decoded already (nil: refused)
}

func (s *fetchSource) ScheduleJob(name string) (*config.Job, bool) {
	if j, done := s.decoded[name]; done {
		return j, j != nil
	}
	if s.visiting[name] || len(s.visiting) > maxRecheckRounds {
		return nil, false
	}
	s.f.mu.RLock()
	e, ok := s.f.byName[name]
	s.f.mu.RUnlock()
	if ok && e.job != nil {
		return e.job, true
	}
	id, ok := config.ScheduleID(name)
	if !ok || config.CheckScheduleID(id) != nil {
		return nil, false
	}
	rec, err := s.f.st.Get(s.ctx, id)
	if err != nil || s.f.olderFetched(s.ctx, rec) != nil {
		return nil, false
	}
	s.visiting[name] = true
	j, err := s.f.decodeWith(s.ctx, rec, s)
	delete(s.visiting, name)
	if err != nil {
		j = nil
	}
	s.decoded[name] = j
	return j, j != nil
}

// describe names the record of id in a message: `runtime schedule "ID"`
// or `runtime calendar "NAME"`.
func describe(id string) string {
	if name, ok := CalendarName(id); ok {
		return fmt.Sprintf("runtime calendar %q", name)
	}
	return fmt.Sprintf("runtime schedule %q", id)
}

// decodedWith tells whether job j was decoded with the copy's calendar
// name as it is now (a schedule read after it). Under f.mu.
func (f *Follower) decodedWith(j *config.Job, name string) bool {
	cs := f.calsBase.Calendars[name]
	return cs != nil && j.Calendars[name] == cs.Calendar
}

// WithCalendarsOf returns base with the runtime calendars the definitions
// docs name that base lacks, read from s (config.Config.WithCalendars): what
// a definition read outside a Follower's copy is decoded with. A calendar
// that does not exist is left out (the decode names it); one that cannot be
// read, is older than the replicas saw (older; nil: s.Older) or does not
// decode is an error naming it and why (else the decode would say only that
// there is no such calendar). For a listing of many definitions, where one
// bad calendar should not fail the others, see ReadableCalendarsOf.
func (s *Store) WithCalendarsOf(ctx context.Context, base *config.Config, older func(context.Context, Record) error, docs ...[]byte) (*config.Config, error) {
	cfg, bad, err := s.ReadableCalendarsOf(ctx, base, older, docs...)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		errs := make([]error, 0, len(bad))
		for _, name := range slices.Sorted(maps.Keys(bad)) {
			errs = append(errs, bad[name])
		}
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// ReadableCalendarsOf is WithCalendarsOf that leaves out the calendars in
// error and gives their errors by name (CalendarErrorOf finds those a
// definition names); err is a failed read of Redis.
func (s *Store) ReadableCalendarsOf(ctx context.Context, base *config.Config, older func(context.Context, Record) error, docs ...[]byte) (cfg *config.Config, bad map[string]error, err error) {
	if older == nil {
		older = s.Older
	}
	need := map[string]bool{}
	for _, d := range docs {
		if !bytes.Contains(d, []byte("exclude")) && !bytes.Contains(d, []byte("only")) {
			continue
		}
		for _, n := range config.ScheduleCalendars(d) {
			if _, ok := base.Calendars[n]; !ok && config.CheckCalendarName(n) == nil {
				need[n] = true
			}
		}
	}
	if len(need) == 0 {
		return base, nil, nil
	}
	ids := make([]string, 0, len(need))
	for _, n := range slices.Sorted(maps.Keys(need)) {
		ids = append(ids, CalendarID(n))
	}
	recs, unread, err := s.GetMany(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime calendars: %w", err)
	}
	extra := map[string]*config.CalendarSpec{}
	for _, id := range ids {
		name, _ := CalendarName(id)
		if err := unread[id]; err != nil {
			bad = mapWith(bad, name, err) // names the calendar
			continue
		}
		r, ok := recs[id]
		if !ok {
			continue
		}
		err := older(ctx, r)
		if err == nil {
			extra[name], _, err = config.DecodeCalendar(name, r.Doc)
		}
		if err != nil {
			delete(extra, name)
			bad = mapWith(bad, name, fmt.Errorf("runtime calendar %q: %w", name, err))
		}
	}
	return base.WithCalendars(extra), bad, nil
}

// CalendarErrorOf is the error of the first calendar in bad (by name, from
// ReadableCalendarsOf) that definition doc names, nil when none.
func CalendarErrorOf(bad map[string]error, doc []byte) error {
	if len(bad) == 0 {
		return nil
	}
	for _, n := range config.ScheduleCalendars(doc) {
		if err := bad[n]; err != nil {
			return err
		}
	}
	return nil
}

func mapWith(m map[string]error, k string, v error) map[string]error {
	if m == nil {
		m = map[string]error{}
	}
	m[k] = v
	return m
}
