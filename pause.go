package baton

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// MaxPauseNote is the longest note a pause takes, in bytes.
const MaxPauseNote = 500

// maxPauseBy is the longest name of who paused a job, in bytes.
const maxPauseBy = 128

// ErrBadPause is returned by Pause for a note or name it does not take, and
// by Resume for a catch-up it cannot do.
var ErrBadPause = errors.New("baton: bad pause")

// PauseNote is who paused a job with Pause, since when and why. The note is
// the operator's text, kept as data: shown (quoted or escaped), never
// interpreted.
type PauseNote struct {
	By string `json:"by"`
	// At is when the job was paused, by the lock masters' clock; pausing a
	// paused job again keeps it.
	At   time.Time `json:"at,omitzero"`
	Note string    `json:"note,omitempty"`
	// Until ends the pause by itself (zero: it lasts until a resume): each
	// lock master drops its flag then, by its own clock, so the job's
	// ticks run again from the first one due once a majority has.
	Until time.Time `json:"until,omitzero"`
}

// maxPauseFor bounds how far ahead a pause may end: a year.
const maxPauseFor = 366 * 24 * time.Hour

// storedPause is a pause flag's value on a lock master (lua/pause.lua).
type storedPause struct {
	V       int    `json:"v"` // format version, formats.PauseFlag (absent: 1)
	By      string `json:"by"`
	Note    string `json:"note"`
	AtMS    int64  `json:"at_ms,omitempty"`    // paused since
	SetMS   int64  `json:"set_ms,omitempty"`   // this value written
	UntilMS int64  `json:"until_ms,omitempty"` // the flag expires then (0: never)
}

// pauseValue is the JSON object lua/pause.lua stores for note p.
func pauseValue(p PauseNote) ([]byte, error) {
	var until int64
	if !p.Until.IsZero() {
		until = p.Until.UnixMilli()
	}
	return json.Marshal(storedPause{V: formats.PauseFlag, By: p.By, Note: p.Note, UntilMS: until})
}

var (
	//go:embed lua/pause.lua
	pauseSrc    string
	pauseScript = redis.NewScript(pauseSrc)
	// a runtime schedule's delete takes its pause with it
	//go:embed lua/unpausebefore.lua
	unpauseBeforeSrc    string
	unpauseBeforeScript = redis.NewScript(unpauseBeforeSrc)
)

// PauseResult says how far a pause or resume got.
type PauseResult struct {
	Job string `json:"job"`
	// Paused is the state asked for.
	Paused bool `json:"paused"`
	// Written is how many lock masters took the change, of Masters;
	// InEffect is true when that is a majority (the claim decides by
	// quorum). Failures names the masters that did not, and why.
	Written  int      `json:"written"`
	Masters  int      `json:"masters"`
	InEffect bool     `json:"in_effect"`
	Failures []string `json:"failures,omitempty"`
	// Pause is who paused it, since when and why (a pause that some
	// master took).
	Pause *PauseNote `json:"pause,omitempty"`
}

// Check tells what is wrong with a pause's name and note (ErrBadPause):
// By must be one printable line of at most 128 bytes, Note valid UTF-8 of
// at most MaxPauseNote bytes (several lines are fine). Pause checks it
// first; a caller may check before it connects.
func (p PauseNote) Check() error {
	switch {
	case p.By == "":
		return fmt.Errorf("%w: say who pauses it", ErrBadPause)
	case len(p.By) > maxPauseBy || !printable(p.By):
		return fmt.Errorf("%w: who pauses it must be one printable line of at most %d bytes", ErrBadPause, maxPauseBy)
	case len(p.Note) > MaxPauseNote:
		return fmt.Errorf("%w: the note is %d bytes, over the limit of %d", ErrBadPause, len(p.Note), MaxPauseNote)
	case !utf8.ValidString(p.Note):
		return fmt.Errorf("%w: the note is not valid UTF-8", ErrBadPause)
	}
	return nil
}

// checkUntil tells what is wrong with a pause's end at now: it must be
// ahead, and within a year.
func (p PauseNote) checkUntil(now time.Time) error {
	switch {
	case p.Until.IsZero():
	case !p.Until.After(now):
		return fmt.Errorf("%w: the pause would end at %s, which has passed", ErrBadPause, p.Until.UTC().Format(time.RFC3339))
	case p.Until.Sub(now) > maxPauseFor:
		return fmt.Errorf("%w: the pause would end at %s, more than a year ahead: pause without an end instead", ErrBadPause, p.Until.UTC().Format(time.RFC3339))
	}
	return nil
}

func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}

// Pause sets job's pause flag on every lock master, in parallel, recording
// who paused it (p.By), why (p.Note) and since when (each master's clock;
// p.At is ignored). The scheduler's claim reads the flag and decides by a
// quorum of masters, so the pause reaches every replica at the job's next
// tick once a majority has it; calling again repairs the rest (and
// replaces who and why, keeping since when). A paused job's ticks are
// recorded as paused: Resume skips them or catches them up. It fails for an
// unknown job, a singleton (no ticks) and a bad name or note (ErrBadPause);
// a partial write is a result, not an error.
func (c *Cluster) Pause(ctx context.Context, job string, p PauseNote) (PauseResult, error) {
	if err := c.pausable(job); err != nil {
		return PauseResult{}, err
	}
	if err := p.Check(); err != nil {
		return PauseResult{}, err
	}
	if err := p.checkUntil(time.Now()); err != nil {
		return PauseResult{}, err
	}
	val, err := pauseValue(p)
	if err != nil {
		return PauseResult{}, err
	}
	key := scheduler.PauseKey(c.cfg.Namespace, job)
	ats := make([]int64, len(c.masters))
	res := c.eachMaster(ctx, job, true, func(ctx context.Context, m redis.UniversalClient, i int) (err error) {
		ats[i], err = pauseScript.Run(ctx, m, []string{key}, string(val)).Int64()
		return err
	})
	if res.Written > 0 {
		note := PauseNote{By: p.By, Note: p.Note, Until: p.Until.UTC()}
		if p.Until.IsZero() {
			note.Until = time.Time{}
		}
		for _, at := range ats {
			if t := time.UnixMilli(at).UTC(); at > 0 && (note.At.IsZero() || t.Before(note.At)) {
				note.At = t // since when: the oldest
			}
		}
		res.Pause = &note
	}
	if res.InEffect {
		c.notePauseOf(ctx, job, true, res.Pause.At, res.Pause.Until)
	}
	return res, nil
}

// pausable fails for a job that has no pause: unknown, or a singleton.
func (c *Cluster) pausable(job string) error {
	j, ok := c.cfg.Job(job)
	switch {
	case !ok:
		return fmt.Errorf("%w: no job %q in the config", ErrUnknownJob, job)
	case j.Mode == config.ModeSingleton:
		return fmt.Errorf("%w: job %q is a singleton: it has no ticks to pause", ErrNotTriggerable, job)
	}
	return nil
}

// eachMaster runs write on every lock master in parallel, each within its
// own bound (one that hangs costs statusStep, and the others' writes
// decide), and says how far it got.
func (c *Cluster) eachMaster(ctx context.Context, job string, paused bool, write func(ctx context.Context, m redis.UniversalClient, i int) error) PauseResult {
	errs := make([]error, len(c.masters))
	var wg sync.WaitGroup
	for i, m := range c.masters {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, statusStep)
			defer cancel()
			errs[i] = write(mctx, m, i)
		})
	}
	wg.Wait()
	res := PauseResult{Job: job, Paused: paused, Masters: len(c.masters)}
	for i, err := range errs {
		if err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("lock master %d: %s", i, c.cfg.MaskSecrets(err.Error())))
			continue
		}
		res.Written++
	}
	res.InEffect = res.Written >= len(c.masters)/2+1
	return res
}

// ResumeResult says how far a resume got, and what its catch-up did.
type ResumeResult struct {
	PauseResult
	// CatchUp is what a resume with catch-up replayed; nil without.
	CatchUp *CatchUpResult `json:"catch_up,omitempty"`
}

// CatchUpResult is what Resume's catch-up did with the ticks recorded
// paused since the pause began.
type CatchUpResult struct {
	// Replayed are the ticks it dispatched.
	Replayed []time.Time `json:"replayed"`
	// Decided are the ticks it found dispatched already (by an earlier
	// catch-up or a backfill).
	Decided []time.Time `json:"decided,omitempty"`
	// Skipped are the paused ticks it left skipped, each with why.
	Skipped []SkippedTick `json:"skipped,omitempty"`
	// Failed are the ticks it could not dispatch, with the last reason: a
	// resume with catch-up again retries them (while they are within the
	// starting deadline).
	Failed []time.Time `json:"failed,omitempty"`
	Reason string      `json:"reason,omitempty"`
}

// SkippedTick is a paused tick a catch-up left skipped.
type SkippedTick struct {
	Tick   time.Time `json:"tick"`
	Reason string    `json:"reason"`
}

// Resume clears job's pause flag on every lock master, in parallel (see
// Pause for how a partial write counts). Without catchUp the ticks
// recorded paused stay skipped. With catchUp, once the resume is in
// effect, the ticks recorded paused since the pause began whose due time
// is within the job's starting deadline of now (by the queue Redis's
// clock) are dispatched through the tick claim, as a backfill is: each at
// most once, also when resumes race, or a resume with catch-up is run
// again. Older paused ticks stay skipped. A job whose runs cannot overlap
// replays only as many of the newest as it can run one after another: one
// for forbid and replace (dispatched together, the others would be skipped
// or replaced), one more than it keeps for buffer_one and buffer_all (the
// others would be dropped). Catch-up is for cron
// jobs that the config does not pause (ErrBadPause otherwise); it fails
// with locking.ErrUnavailable when Redis does not answer. ctx bounds the
// whole call: the ticks not dispatched when it ends are Failed.
func (c *Cluster) Resume(ctx context.Context, job string, catchUp bool) (ResumeResult, error) {
	if err := c.pausable(job); err != nil {
		return ResumeResult{}, err
	}
	j, _ := c.cfg.Job(job)
	var since time.Time
	if catchUp {
		switch {
		case j.Mode != config.ModeCron:
			return ResumeResult{}, fmt.Errorf("%w: %q is a %s job; only cron jobs (run through the queue) can catch up paused ticks: resume it without catch-up", ErrBadPause, job, j.Mode)
		case j.Paused:
			return ResumeResult{}, fmt.Errorf("%w: %q is paused by the config (paused: true), which resume does not change: no tick can be caught up", ErrBadPause, job)
		}
		states, err := c.pauseStates(ctx, []string{job})
		if err != nil {
			return ResumeResult{}, err
		}
		if n := states[job].note; n != nil {
			since = n.At
		}
	}
	key := scheduler.PauseKey(c.cfg.Namespace, job)
	res := ResumeResult{PauseResult: c.eachMaster(ctx, job, false, func(ctx context.Context, m redis.UniversalClient, _ int) error {
		return m.Del(ctx, key).Err()
	})}
	if res.InEffect {
		c.notePauseOf(ctx, job, false, time.Time{}, time.Time{})
	}
	if !catchUp || !res.InEffect {
		return res, nil // not resumed: the ticks stay paused
	}
	cu, err := c.catchUp(ctx, j, since)
	res.CatchUp = &cu
	return res, err
}

// catchUp dispatches j's ticks recorded paused at or after since (zero: any)
// and within its starting deadline, through the claim; see Resume.
func (c *Cluster) catchUp(ctx context.Context, j *config.Job, since time.Time) (CatchUpResult, error) {
	res := CatchUpResult{Replayed: []time.Time{}}
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return res, fmt.Errorf("%w: queue Redis: %w", locking.ErrUnavailable, err)
	}
	recs, err := history.Read(ctx, c.queue, c.cfg.Namespace, j.Name, 0)
	if err != nil {
		return res, err
	}
	ran := map[int64]bool{}
	var paused []time.Time
	earlier := map[int64]bool{} // recorded paused before this pause began
	oldest := now.Add(-j.StartingDeadline)
	// which pause a paused record belongs to is told by when it was
	// recorded (the stream entry's Redis time), not by when the tick was
	// due: a tick due just before the pause is claimed, and recorded
	// paused, after it began. The two clocks (the master that took the
	// pause, the queue Redis) may differ by the skew bound.
	from := since.Add(-c.cfg.MaxClockSkew)
	for _, r := range recs {
		switch {
		case r.Manual:
		case r.Status == jobs.StatusPaused:
			switch {
			case since.IsZero() || !r.Ended.Before(from):
				paused = append(paused, r.Tick.UTC())
			case !r.Tick.Before(oldest):
				earlier[r.Tick.UnixMilli()] = true
			}
		case r.Status != jobs.StatusMissed:
			ran[r.Tick.UnixMilli()] = true // dispatched (by a backfill, say)
		}
	}
	for ms := range earlier {
		if t := time.UnixMilli(ms).UTC(); !ran[ms] && !slices.ContainsFunc(paused, t.Equal) {
			res.Skipped = append(res.Skipped, SkippedTick{t, "recorded paused before this pause began (an earlier pause)"})
		}
	}
	slices.SortFunc(paused, time.Time.Compare)
	paused = slices.Compact(paused)
	// a job that cannot overlap replays the newest it can run one after
	// another, counting those dispatched already (by an earlier catch-up:
	// run again, it finds them dispatched and the older ones still skipped)
	keep, why := len(paused), ""
	if j.Concurrency != config.ConcurrencyAllow {
		keep = 1 + j.BufferBound()
		why = fmt.Sprintf("concurrency %s: only the newest paused tick is replayed", j.Concurrency)
		if keep > 1 {
			why = fmt.Sprintf("concurrency %s: only the newest %d paused ticks are replayed (one runs, %d kept)", j.Concurrency, keep, keep-1)
		}
	}
	var ticks []time.Time
	n := 0 // ticks replayed or dispatched already, newest first
	// a tick skipped on request (baton skip) is recorded paused too: it
	// stays skipped, whatever the history kept of its skip
	skipped := c.skippedOn(ctx, j.Name, paused)
	for _, t := range slices.Backward(paused) {
		by, skip := skipped[t.UnixMilli()]
		switch {
		case skip:
			res.Skipped = append(res.Skipped, SkippedTick{t, by})
		case ran[t.UnixMilli()]:
			res.Decided = append(res.Decided, t)
			n++
		case t.Before(oldest):
			res.Skipped = append(res.Skipped, SkippedTick{t, fmt.Sprintf("due more than the starting deadline (%s) ago", j.StartingDeadline)})
		case n >= keep:
			res.Skipped = append(res.Skipped, SkippedTick{t, why})
		default:
			ticks = append(ticks, t)
			n++
		}
	}
	slices.Reverse(ticks)
	slices.SortFunc(res.Decided, time.Time.Compare)
	slices.SortFunc(res.Skipped, func(a, b SkippedTick) int { return a.Tick.Compare(b.Tick) })
	if len(ticks) == 0 {
		return res, nil
	}
	s, err := scheduler.New(c.locks, []scheduler.Job{schedulerJob(j)}, c.dispatcher(), schedulerOptions(c.cfg, "resume")...)
	if err != nil {
		return res, err
	}
	br, err := s.Backfill(ctx, j.Name, ticks)
	res.Replayed = append(res.Replayed, br.Dispatched...)
	res.Decided = append(res.Decided, br.Decided...)
	slices.SortFunc(res.Decided, time.Time.Compare)
	res.Failed, res.Reason = br.Failed, br.Reason
	return res, err
}

// pauseState is one job's pause flags as the lock masters have them.
type pauseState struct {
	// masters counts the masters that have the flag.
	masters int
	// note is who and why from the newest write, since when from the
	// oldest; nil when no master has a note (a flag as older versions
	// wrote it).
	note *PauseNote
}

// pauseStates reads the pause flags of jobs on every lock master. It fails
// when fewer than a quorum answered.
func (c *Cluster) pauseStates(ctx context.Context, names []string) (map[string]pauseState, error) {
	vals := make([][]*redis.StringCmd, len(c.masters))
	errs := make([]error, len(c.masters))
	var wg sync.WaitGroup
	for i, m := range c.masters {
		wg.Go(func() {
			pipe := m.Pipeline()
			cmds := make([]*redis.StringCmd, len(names))
			for k, name := range names {
				cmds[k] = pipe.Get(ctx, scheduler.PauseKey(c.cfg.Namespace, name))
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				errs[i] = err
				return
			}
			vals[i] = cmds
		})
	}
	wg.Wait()
	out := map[string]pauseState{}
	newest := map[string]int64{}
	answered := 0
	var last error
	var corrupt []error
	var newer error
	for i := range c.masters {
		if errs[i] != nil {
			last = errs[i]
			continue
		}
		answered++
		for k, name := range names {
			v, err := vals[i][k].Result()
			if err != nil {
				continue // absent
			}
			st := out[name]
			st.masters++ // the claim pauses on the flag's presence
			var sp storedPause
			if err := formats.Check("pause flag", formats.PauseFlag, formats.VersionOf([]byte(v))); err != nil {
				// a later release's flag: it pauses the job all the same;
				// who, why and since when are not read from it
				newer = err
				out[name] = st
				continue
			}
			if json.Unmarshal([]byte(v), &sp) != nil || sp.AtMS <= 0 || sp.AtMS >= 1<<53 || sp.SetMS < 0 || sp.SetMS >= 1<<53 {
				if v != "1" { // "1": a flag without a note, as earlier versions wrote it
					corrupt = append(corrupt, &jobs.CorruptError{Key: scheduler.PauseKey(c.cfg.Namespace, name), Field: fmt.Sprintf("on lock master %d", i),
						Value: redact.Cut(v), Want: `a pause record (a JSON object with "at_ms", as baton pause writes it) or "1"`})
				}
			} else {
				since := time.UnixMilli(sp.AtMS).UTC()
				var until time.Time
				if sp.UntilMS > 0 && sp.UntilMS < 1<<53 {
					until = time.UnixMilli(sp.UntilMS).UTC()
				}
				switch {
				case st.note == nil:
					st.note = &PauseNote{By: sp.By, At: since, Note: sp.Note, Until: until}
					newest[name] = sp.SetMS
				case sp.SetMS > newest[name]:
					st.note.By, st.note.Note, st.note.Until, newest[name] = sp.By, sp.Note, until, sp.SetMS
				}
				if since.Before(st.note.At) {
					st.note.At = since
				}
			}
			out[name] = st
		}
	}
	if q := len(c.masters)/2 + 1; answered < q {
		return out, fmt.Errorf("%w: pause flags: %d of %d lock masters answer, %d needed: %w", locking.ErrUnavailable, answered, len(c.masters), q, last)
	}
	if len(corrupt) > 0 {
		// the flags count (the claims pause on them); who, why and since
		// when are not known from those masters
		return out, fmt.Errorf("baton: pause flags (they pause the job; delete the key to resume, or pause again to rewrite it): %w", errors.Join(append(corrupt, newer)...))
	}
	if newer != nil {
		return out, fmt.Errorf("baton: pause flags (they pause the job; who paused it, why and since when are not read): %w", newer)
	}
	return out, nil
}
