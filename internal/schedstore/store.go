// Package schedstore keeps the schedules made at runtime in the queue
// Redis and follows their changes: the Store puts, reads, lists and
// deletes definitions; a Follower holds every replica's copy of them,
// brought up to date by a stream of changes it reads as they are made,
// with a periodic full read as the fallback.
//
// A definition is stored as written (compact JSON with the job list's
// keys), signed under the config's signing keys when it has some, and is
// checked again by every replica that reads it (config.DecodeSchedule):
// a definition that is not signed, or not valid, is refused and reported,
// never run.
package schedstore

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/layout"
)

// Errors. The root package exports them (baton.ErrNoSchedule,
// baton.ErrScheduleChanged): their texts begin with the name of the
// package users match them by.
var (
	// ErrNotFound: no runtime schedule has the id.
	ErrNotFound = errors.New("baton: no such runtime schedule")
	// ErrChanged: the schedule changed since the version a put was
	// conditioned on.
	ErrChanged = errors.New("baton: the runtime schedule changed since the version given")
)

// DomainSchedule is the signature domain of a stored definition.
const DomainSchedule = "baton schedule v1"

// LogLength is about how many changes the stream of changes keeps: a
// replica that falls further behind reads every schedule again.
const LogLength = 10000

// Record is a runtime schedule as stored.
type Record struct {
	ID  string
	Doc json.RawMessage // the definition: compact JSON, the job list's keys
	// Created is when the id was first put (by Redis's clock; a ms after
	// the shard's last change when that is later: a schedule deleted and
	// put again in the same ms, or after the clock went back, is created
	// after the deleted one)
	Created time.Time
	Updated time.Time // when this definition was put (by Redis's clock)
	// Version counts the schedule's own changes: 1 when first put, one
	// more with each put that changes its definition (a schedule deleted
	// and put again starts at 1 again: Created tells them apart). A signed
	// put skips the versions signed already (Store.reserve) and those a
	// replica saw of a copy put back.
	Version int64
	// Change is the change of the shard that put it: changes grow with
	// every put and delete of any schedule of the shard (a Follower at
	// Change or later holds this record or a newer one).
	Change int64
	// Bound: the signature covers Created and Version as well as the
	// definition (every put since 0.2.0 that signs), so that a replica that
	// saw a newer definition of the id refuses this one put back (Marks).
	// A definition signed before, or without keys, is not bound.
	Bound bool
	raw   string // the stored value
}

// Ref names the definition r holds (config.ScheduleRef).
func (r Record) Ref() config.ScheduleRef {
	return config.ScheduleRef{Version: max(r.Version, 1), Created: r.Created}
}

// Job decodes r's definition into the job it runs, checked against base's
// rules (config.DecodeSchedule); the job carries r's Ref.
func (r Record) Job(base *config.Config) (*config.Job, error) {
	j, err := config.DecodeSchedule(base, r.ID, r.Doc, r.Created)
	if err != nil {
		return nil, err
	}
	j.Ref = r.Ref()
	return j, nil
}

// Match is what a conditional put expects of the stored schedule.
type Match struct {
	// Version is the schedule's version (0: there must be none).
	Version int64
	// Created, when not zero, is the schedule's Created: a put only over
	// that schedule, not one deleted and put again since.
	Created time.Time
}

// Any is the Match of an unconditional put.
var Any = Match{Version: -1}

func (m Match) args() (version, created string) {
	if m.Version == -2 {
		version = "-1" // put.lua: only over a value that is not a record
	}
	if m.Version >= 0 {
		version = strconv.FormatInt(m.Version, 10)
	}
	if !m.Created.IsZero() {
		created = strconv.FormatInt(m.Created.UnixMilli(), 10)
	}
	return version, created
}

// CorruptError is a stored value that cannot be read as a record.
type CorruptError struct {
	Key, ID string
	Why     string
}

func (e *CorruptError) Error() string {
	what := "schedule"
	if _, ok := CalendarName(e.ID); ok {
		what = "calendar"
	}
	return fmt.Sprintf("%s: the value in %s is not a baton schedule record (%s): put the %s again, or delete it", describe(e.ID), e.Key, e.Why, what)
}

// Store reads and writes a namespace's runtime schedules.
type Store struct {
	rdb    redis.UniversalClient
	ns     string
	shards []keys // by shard
	sign   *handoff.Signer
	keep   Marks // the replicas' marks a signed put reads (nil: none)
}

// New returns the Store of namespace ns on the queue Redis rdb, split into
// shards shards (schedules.shards; < 1: one), signing and checking
// definitions with sign (nil or without keys: unsigned).
func New(rdb redis.UniversalClient, ns string, sign *handoff.Signer, shards int) *Store {
	shards = max(shards, 1)
	s := &Store{rdb: rdb, ns: ns, sign: sign, shards: make([]keys, shards)}
	for k := range shards {
		s.shards[k] = newKeys(ns, k, shards)
	}
	return s
}

// Of returns the Store of cfg's runtime schedules on the queue Redis rdb.
func Of(rdb redis.UniversalClient, cfg *config.Config) *Store {
	return New(rdb, cfg.Namespace, handoff.NewSigner(cfg.Security), cfg.Schedules.Shards)
}

// Shards returns how many shards the store has.
func (s *Store) Shards() int { return len(s.shards) }

// ShardOf returns the shard of schedule id.
func (s *Store) ShardOf(id string) int { return config.ScheduleShard(id, len(s.shards)) }

// keysOf returns the keys of schedule id's shard.
func (s *Store) keysOf(id string) keys { return s.shards[s.ShardOf(id)] }

var (
	// the scripts that read a record's head read it with record.lua's
	// read_record
	//go:embed lua/record.lua
	recordSrc string
	//go:embed lua/put.lua
	putSrc    string
	putScript = redis.NewScript(recordSrc + putSrc)
	// the scripts that delete log it as logdelete.lua's log_delete does
	//go:embed lua/logdelete.lua
	logDeleteSrc string
	//go:embed lua/delete.lua
	deleteSrc    string
	deleteScript = redis.NewScript(recordSrc + logDeleteSrc + deleteSrc)
	//go:embed lua/restore.lua
	restoreSrc    string
	restoreScript = redis.NewScript(logDeleteSrc + restoreSrc)
)

// A record's definition is stored as it is (its signature member appended
// when signed), signed under its id as well as the namespace (recordDomain),
// so that a definition cannot be moved to another id. An earlier form,
// still read, wrapped it as {"id": ID, "doc": DEFINITION} and signed that.
//
// earlier is that earlier form.
type earlier struct {
	ID  string          `json:"id"`
	Doc json.RawMessage `json:"doc"`
}

// earlierPrefix starts a record of the earlier form: json.Marshal writes
// the id first, and a definition has no key "id" (config.DecodeSchedule
// refuses it).
const earlierPrefix = `{"id":`

func (s *Store) domain() string { return DomainSchedule + "\x00" + s.ns }

// recordDomain is the signature domain of schedule id's definition as
// signed before 0.2.0: bound to its id alone.
func (s *Store) recordDomain(id string) string { return s.domain() + "\x00" + id }

// boundDomain is the signature domain of schedule id's definition at
// version own of the schedule created at created (unix ms): a definition
// signed under it cannot be stored as another version or incarnation of
// the id, so a copy of an older one put back says it is older.
func (s *Store) boundDomain(id string, created, own int64) string {
	return s.recordDomain(id) + "\x00" + strconv.FormatInt(created, 10) + "\x00" + strconv.FormatInt(own, 10)
}

// putAttempts bounds how often a signed put reads the schedule again after
// another put or delete of it came between its read and its write.
const putAttempts = 64

// Put stores doc (a checked definition, compact JSON) as schedule id, if
// the stored schedule matches m (Any: whatever is there), else fails with
// ErrChanged.
//
// With signing keys the definition is signed for the version and created
// it is stored as (boundDomain), which the put must know before it writes:
// it reads the schedule, signs for the next version (a new schedule: for a
// created after the shard's last change), and writes only if the schedule
// is still as read; another put or delete in between makes it read again.
func (s *Store) Put(ctx context.Context, id string, doc json.RawMessage, m Match) (Record, error) {
	if err := storable(doc); err != nil {
		return Record{}, fmt.Errorf("%s: %w", describe(id), err)
	}
	if !s.sign.Enabled() {
		return s.put(ctx, id, doc, doc, m, nil)
	}
	for range putAttempts {
		cur, err := s.readForPut(ctx, id)
		if err != nil {
			return Record{}, err
		}
		if err := cur.meets(m); err != nil {
			return Record{}, s.changed(id, "put", m, err.(curVersion).v)
		}
		mark, marked, err := s.markOf(ctx, id)
		if err != nil {
			return Record{}, err
		}
		// the put is conditioned on what was read, whatever m is
		cond := Match{Version: -2} // "-1" to put.lua: not a record
		if cur.readable {
			cond = Match{Version: cur.own, Created: time.UnixMilli(cur.created)}
		} else if !cur.exists {
			cond = Match{Version: 0}
		}
		b := cur.binding(mark, marked)
		same := b.own == cur.own+1 && b.created == cur.created && cur.same(doc)
		if same && s.keep != nil {
			// unless a later version was signed: then the schedule holds
			// a copy put back, which the replicas that saw the later one
			// refuse though their mark did not reach the lock masters
			_, high, err := s.keep.Reserve(ctx, id, cur.created, cur.own)
			if err != nil {
				return Record{}, err
			}
			same = high <= cur.own
		}
		if same {
			// the definition it holds, bound: nothing changes
			rec, err := s.put(ctx, id, doc, []byte(cur.def), cond, nil)
			if errors.Is(err, errRaced) {
				continue
			}
			rec.Bound = err == nil
			return rec, err
		}
		if b, err = s.reserve(ctx, id, b); err != nil {
			return Record{}, err
		}
		rec, err := s.put(ctx, id, doc, s.sign.Sign(s.boundDomain(id, b.created, b.own), doc), cond, &b)
		if errors.Is(err, errRaced) {
			continue
		}
		rec.Bound = err == nil
		return rec, err
	}
	return Record{}, fmt.Errorf("%s: put: changed by other puts or deletes %d times while this one read it: %w", describe(id), putAttempts, ErrChanged)
}

// reserve reserves binding b of a put over cur on the lock masters (Marks
// Reserve), or the next one above what another put reserved: no two
// definitions are signed for one created and version of an id, though the
// store lost (an older snapshot, a restart) or never took (a put that
// failed, or lost a race) the one signed first. A version reserved and
// not written is not used: the schedule's versions skip it. Without marks
// (WithMarks), b as it is.
func (s *Store) reserve(ctx context.Context, id string, b binding) (binding, error) {
	if s.keep == nil {
		return b, nil
	}
	for range putAttempts {
		granted, high, err := s.keep.Reserve(ctx, id, b.created, b.own)
		if err != nil {
			return binding{}, err
		}
		if granted {
			return b, nil
		}
		b.own = high + 1
	}
	return binding{}, fmt.Errorf("%s: put: the version to sign was taken by other puts %d times: %w", describe(id), putAttempts, ErrChanged)
}

// errRaced: a signed put found the schedule changed since it read it.
var errRaced = errors.New("the runtime schedule changed since the put read it")

// binding is the created (unix ms) and version a put's signature names,
// which put.lua checks the record it writes has.
type binding struct{ created, own int64 }

// put runs put.lua: doc as stored, signed (body), if the schedule matches m;
// with b, only as b's created and version (else errRaced).
func (s *Store) put(ctx context.Context, id string, doc, body []byte, m Match, b *binding) (Record, error) {
	version, created := m.args()
	var bc, bo string
	if b != nil {
		bc, bo = strconv.FormatInt(b.created, 10), strconv.FormatInt(b.own, 10)
	}
	res, err := putScript.Run(ctx, s.rdb, s.keysOf(id).all(), id, body, LogLength, version, created, bc, bo).Int64Slice()
	if moving(err) {
		return Record{}, fmt.Errorf("%s: put: %w", describe(id), layout.ErrMoving)
	}
	if err != nil {
		return Record{}, fmt.Errorf("%s: put: %w", describe(id), err)
	}
	if len(res) == 1 && res[0] == -2 {
		return Record{}, errRaced
	}
	if len(res) == 2 && res[0] == -1 {
		if b != nil || s.sign.Enabled() {
			// conditioned on what the put read: changed since
			return Record{}, errRaced
		}
		return Record{}, s.changed(id, "put", m, res[1])
	}
	if len(res) != 4 {
		return Record{}, fmt.Errorf("%s: put: unexpected reply %v", describe(id), res)
	}
	return Record{ID: id, Doc: doc, Change: res[0], Created: time.UnixMilli(res[1]).UTC(), Updated: time.UnixMilli(res[2]).UTC(), Version: res[3]}, nil
}

// putRead is a schedule as a signed put reads it.
type putRead struct {
	exists   bool   // a value is stored under the id
	readable bool   // put.lua reads it as a record (its head)
	created  int64  // unix ms, when readable
	own      int64  // its version, when readable
	def      string // its signed definition as stored, when readable
	verified bool   // its signature verified (bound or not)
	bound    bool   // its signature covers its created and version
	doc      []byte // its definition, when verified and bound
	next     int64  // the created (unix ms) of a new schedule put now
}

// binding is the created and version a put over r signs for, given the
// replicas' mark of the id (marked: there is one): the next version of
// the schedule r holds when r is a record whose signature vouches for it
// and the mark does not say it is a copy put back (one signed before
// versions were bound, with no mark, too); the version after the mark's
// of that schedule when r is its copy put back; else a new schedule,
// created after the shard's last change and after the mark's schedule.
func (r putRead) binding(mark Mark, marked bool) binding {
	switch {
	case r.readable && r.verified && (!marked || r.bound && mark.admits(r.created, r.own)):
		return binding{created: r.created, own: r.own + 1}
	case r.readable && marked && !mark.Deleted && mark.Created == r.created:
		return binding{created: r.created, own: max(r.own, mark.Version) + 1}
	}
	next := r.next
	if marked && next <= mark.Created {
		next = mark.Created + 1
	}
	return binding{created: next, own: 1}
}

// readForPut reads schedule id's stored value, Redis's time and the shard's
// last change, at one instant.
func (s *Store) readForPut(ctx context.Context, id string) (putRead, error) {
	k := s.keysOf(id)
	var get *redis.StringCmd
	var now *redis.TimeCmd
	var top *redis.XMessageSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.HGet(ctx, k.defs, id)
		now = p.Time(ctx)
		top = p.XRevRangeN(ctx, k.log, "+", "-", 1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return putRead{}, fmt.Errorf("%s: put: read it: %w", describe(id), err)
	}
	t, err := now.Result()
	if err != nil {
		return putRead{}, fmt.Errorf("%s: put: read Redis's time: %w", describe(id), err)
	}
	r := putRead{next: t.UnixMilli()}
	if msgs, _ := top.Result(); len(msgs) == 1 {
		// after the shard's last change, as put.lua requires of a new one
		ms, _, _ := strings.Cut(msgs[0].ID, "-")
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil && r.next <= n {
			r.next = n + 1
		}
	}
	raw, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return r, nil
	}
	if err != nil {
		return putRead{}, fmt.Errorf("%s: put: read it: %w", describe(id), err)
	}
	r.exists = true
	h, err := s.head(id, raw)
	if err != nil {
		return r, nil // not a record: an unconditional put replaces it
	}
	r.readable, r.created, r.own, r.def = true, h.Created.UnixMilli(), h.Version, h.def
	if rec, err := s.verify(h); err == nil {
		r.verified, r.bound = true, rec.Bound
		if rec.Bound {
			r.doc = rec.Doc
		}
	}
	return r, nil
}

// markOf returns the replicas' mark of schedule id (Marks), when the store
// has them (WithMarks).
func (s *Store) markOf(ctx context.Context, id string) (Mark, bool, error) {
	if s.keep == nil {
		return Mark{}, false, nil
	}
	m, ok, err := s.keep.Get(ctx, id)
	if err != nil {
		return Mark{}, false, fmt.Errorf("%s: put: read the mark of what replicas saw of it: %w", describe(id), err)
	}
	return m, ok, nil
}

// WithMarks makes a signed put read the replicas' mark of its schedule
// (Marks), so that a put over a copy put back, or over a schedule the
// store lost, signs a version the replicas take. It returns s.
func (s *Store) WithMarks(keep Marks) *Store {
	s.keep = keep
	return s
}

// curVersion is the version a put's condition did not meet (see changed).
type curVersion struct{ v int64 }

func (c curVersion) Error() string { return fmt.Sprintf("at version %d", c.v) }

// meets tells whether the schedule as read meets m, as put.lua's
// record_matches would: nil, or a curVersion.
func (r putRead) meets(m Match) error {
	version, created := m.args()
	switch {
	case version == "" && created == "":
		return nil
	case !r.exists:
		if created != "" || version != "0" {
			return curVersion{0}
		}
		return nil
	case !r.readable:
		return curVersion{-1}
	}
	if (version != "" && m.Version != r.own) || (created != "" && m.Created.UnixMilli() != r.created) {
		return curVersion{r.own}
	}
	return nil
}

// same tells whether the schedule as read holds doc, bound: a put of it
// again changes nothing (a definition not bound is signed again, bound).
func (r putRead) same(doc []byte) bool { return r.doc != nil && bytes.Equal(r.doc, doc) }

// changed is the ErrChanged of a put or delete (op) of schedule id whose
// condition m the stored schedule, at version cur (0: none; -1: a value
// readers cannot read), did not meet.
func (s *Store) changed(id, op string, m Match, cur int64) error {
	switch {
	case cur == -1:
		return fmt.Errorf("%s: the value in %s is not a baton schedule record, which no version matches (put it without a condition, or delete it): %w", describe(id), s.keysOf(id).defs, ErrChanged)
	case cur == 0:
		return fmt.Errorf("%s does not exist (the %s expected version %d): %w", describe(id), op, m.Version, ErrChanged)
	case m.Version == 0:
		return fmt.Errorf("%s exists already (version %d): %w", describe(id), cur, ErrChanged)
	case m.Version >= 0 && cur != m.Version:
		return fmt.Errorf("%s is at version %d, not %d: %w", describe(id), cur, m.Version, ErrChanged)
	}
	return fmt.Errorf("%s was deleted and put again since it was read (now at version %d): %w", describe(id), cur, ErrChanged)
}

// splitOwn cuts the schedule's own version off what follows the change in
// a stored value: "version|definition", or the definition alone (a value
// put before versions were the schedule's own: version 1). A definition
// starts with "{" (a JSON object), as record.lua's read_record reads it:
// a value the scripts cannot read is one readers cannot read either.
func splitOwn(rest string) (version int64, def string, ok bool) {
	i := strings.IndexByte(rest, '|')
	if strings.HasPrefix(rest, "{") || i < 0 {
		return 1, rest, strings.HasPrefix(rest, "{")
	}
	n, ok := decimal(rest[:i])
	if !ok || n < 1 || !strings.HasPrefix(rest[i+1:], "{") {
		return 0, "", false
	}
	return n, rest[i+1:], true
}

// decimal reads a number of a stored value's head: digits alone (no sign,
// no space), as put.lua reads them.
func decimal(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// storable tells why definition doc cannot be stored as it is, nil when it
// can: it must be one JSON object, compact (the signature goes before its
// closing brace, and a reader finds it at the end), that neither starts
// with the key "id" (a record of the earlier form does) nor ends with a
// member "sig" a reader would take for the signature.
func storable(doc []byte) error {
	var compact bytes.Buffer
	switch {
	case !json.Valid(doc) || bytes.IndexByte(bytes.TrimSpace(doc), '{') != 0:
		return errors.New("the definition is not a JSON object of the job list's keys")
	case json.Compact(&compact, doc) != nil || !bytes.Equal(compact.Bytes(), doc):
		return errors.New("the definition is not compact JSON (no space between or around its tokens)")
	case bytes.HasPrefix(doc, []byte(earlierPrefix)):
		return errors.New(`the definition has the key "id" (the schedule's id names it)`)
	}
	if _, signed := handoff.Unsign(doc); signed {
		return errors.New(`the definition ends with a member "sig" (a signature's name)`)
	}
	return nil
}

// Delete removes schedule id; false when there was none.
func (s *Store) Delete(ctx context.Context, id string) (bool, error) {
	ok, _, err := s.DeleteIf(ctx, id, Any)
	return ok, err
}

// DeleteIf removes schedule id if it matches m (Any: whatever is there),
// else fails with ErrChanged (a schedule that does not exist matches only
// Any); false when there was none. created is the deleted schedule's
// (zero for a value that was not a record).
func (s *Store) DeleteIf(ctx context.Context, id string, m Match) (ok bool, created time.Time, err error) {
	k := s.keysOf(id)
	version, createdArg := m.args()
	res, err := deleteScript.Run(ctx, s.rdb, append(k.all(), k.restored), id, LogLength, version, createdArg).Int64Slice()
	if moving(err) {
		return false, time.Time{}, fmt.Errorf("%s: delete: %w", describe(id), layout.ErrMoving)
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("%s: delete: %w", describe(id), err)
	}
	switch {
	case len(res) == 2 && res[0] == -1:
		return false, time.Time{}, s.changed(id, "delete", m, res[1])
	case len(res) == 1 && res[0] == 0:
		return false, time.Time{}, nil
	case len(res) != 2:
		return false, time.Time{}, fmt.Errorf("%s: delete: unexpected reply %v", describe(id), res)
	}
	if res[1] > 0 {
		created = time.UnixMilli(res[1]).UTC()
		if s.keep != nil && s.sign.Enabled() {
			// the delete's own mark (the replicas raise it a moment later,
			// or not, if the lock masters cannot take it then): a put over
			// the schedule brought back (an older snapshot, a copy put
			// back) signs a new one, which the replicas take; not kept,
			// the replicas' stands in for it
			_ = s.keep.Raise(ctx, map[string]Mark{id: {Created: res[1], Deleted: true}})
		}
	}
	return true, created, nil
}

// moving tells a put's or delete's error that baton init is moving the
// schedules (the shard's guard is set).
func moving(err error) bool { return err != nil && redis.HasErrorPrefix(err, "MOVING") }

// Get returns schedule id (ErrNotFound when there is none). A record that
// is corrupt, unsigned or badly signed is an error naming it.
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	v, err := s.rdb.HGet(ctx, s.keysOf(id).defs, id).Result()
	if errors.Is(err, redis.Nil) {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("%s: read: %w", describe(id), err)
	}
	return s.parse(id, v)
}

// GetMany returns the records of ids that exist, by id, and the errors of
// the ones that cannot be read, by id.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]Record, map[string]error, error) {
	recs := make(map[string]Record, len(ids))
	bad := map[string]error{}
	if len(ids) == 0 {
		return recs, bad, nil
	}
	// one HMGET per shard, pipelined (a Cluster client sends each to its
	// shard's primary)
	byShard := map[int][]string{}
	for _, id := range ids {
		k := s.ShardOf(id)
		byShard[k] = append(byShard[k], id)
	}
	cmds := map[int]*redis.SliceCmd{}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, some := range byShard {
			cmds[k] = p.HMGet(ctx, s.shards[k].defs, some...)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("runtime schedules: read: %w", err)
	}
	for k, some := range byShard {
		for i, v := range cmds[k].Val() {
			str, ok := v.(string)
			if !ok {
				continue
			}
			r, err := s.parse(some[i], str)
			if err != nil {
				bad[some[i]] = err
				continue
			}
			recs[some[i]] = r
		}
	}
	return recs, bad, nil
}

// List returns up to limit schedules in id order: those whose id starts
// with prefix, after the id after (exclusive; "" from the first). next is
// the id to pass as after for the next page, "" after the last. Records
// that cannot be read come back in bad, by id. Calendars (ListCalendars)
// are not listed.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (recs []Record, bad map[string]error, next string, err error) {
	if strings.HasPrefix(prefix, calendarPrefix[:1]) {
		return nil, nil, "", nil // no schedule id begins so
	}
	return s.list(ctx, prefix, after, limit, "("+calendarPrefix[:1])
}

// list is List of the ids from prefix up to hi (a ZRANGE BYLEX bound).
func (s *Store) list(ctx context.Context, prefix, after string, limit int, hi string) (recs []Record, bad map[string]error, next string, err error) {
	if limit < 1 {
		limit = 100
	}
	lo := "[" + prefix
	if after != "" && after >= prefix {
		lo = "(" + after
	}
	if prefix != "" {
		hi = "[" + prefix + "\xff"
	}
	// each shard's first limit+1 ids after lo, merged: the page is the
	// first limit of them all
	cmds := make([]*redis.StringSliceCmd, len(s.shards))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, ks := range s.shards {
			cmds[k] = p.ZRangeArgs(ctx, redis.ZRangeArgs{Key: ks.ids, Start: lo, Stop: hi, ByLex: true, Count: int64(limit) + 1})
		}
		return nil
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("runtime schedules: list: %w", err)
	}
	var ids []string
	for _, c := range cmds {
		ids = append(ids, c.Val()...)
	}
	slices.Sort(ids)
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	byID, bad, err := s.GetMany(ctx, ids)
	if err != nil {
		return nil, nil, "", err
	}
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			recs = append(recs, r)
		}
	}
	return recs, bad, next, nil
}

// Count returns how many runtime schedules there are (calendars not
// counted).
func (s *Store) Count(ctx context.Context) (int64, error) {
	cmds := make([]*redis.IntCmd, len(s.shards))
	cals := make([]*redis.IntCmd, len(s.shards))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, ks := range s.shards {
			cmds[k] = p.HLen(ctx, ks.defs)
			cals[k] = p.ZLexCount(ctx, ks.ids, "["+calendarPrefix, "["+calendarPrefix+"\xff")
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for k, c := range cmds {
		n += c.Val() - cals[k].Val()
	}
	return n, nil
}

// parse reads a stored value: "created|+updated|change|version|" (unix ms,
// the ms from created to updated, the shard's change, the schedule's own
// version; a value without the version is at 1) and the signed definition,
// checked against the signing keys.
func (s *Store) parse(id, v string) (Record, error) {
	h, err := s.head(id, v)
	if err != nil {
		return Record{}, err
	}
	return s.verify(h)
}

// headed is a stored value whose head was read: the record without its
// definition, and the definition as stored (signed).
type headed struct {
	Record
	def string
}

// head reads stored value v's head, as put.lua's read_record does.
func (s *Store) head(id, v string) (headed, error) {
	corrupt := func(why string) (headed, error) {
		return headed{}, &CorruptError{Key: s.keysOf(id).defs, ID: id, Why: why}
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return corrupt("no created|updated|change| head")
	}
	own, def, ok := splitOwn(parts[3])
	if !ok {
		return corrupt("what follows its change is neither a version above 0 and \"|\" nor a definition")
	}
	var nums [3]int64
	for i := range 3 {
		// updated is "+" and ms after created (the earlier form: unix ms)
		after := i == 1 && strings.HasPrefix(parts[i], "+")
		field := parts[i]
		if after {
			field = field[1:]
		}
		n, ok := decimal(field)
		if !ok {
			return corrupt(fmt.Sprintf("field %d of its head is %q, not a number", i+1, parts[i]))
		}
		if after {
			n += nums[0]
		}
		nums[i] = n
	}
	return headed{Record: Record{ID: id, Created: time.UnixMilli(nums[0]).UTC(), Updated: time.UnixMilli(nums[1]).UTC(), Change: nums[2], Version: own, raw: v}, def: def}, nil
}

// verify checks h's definition against the signing keys: signed for its
// created and version (bound), or, as signed before 0.2.0, for its id.
func (s *Store) verify(h headed) (Record, error) {
	id, rec := h.ID, h.Record
	corrupt := func(why string) (Record, error) {
		return Record{}, &CorruptError{Key: s.keysOf(id).defs, ID: id, Why: why}
	}
	refused := func(err error) (Record, error) {
		return Record{}, fmt.Errorf("%s: %w: refused (put it again with a replica or tool that has the signing key)", describe(id), err)
	}
	if strings.HasPrefix(h.def, earlierPrefix) {
		body, err := s.sign.Verify(s.domain(), []byte(h.def))
		if err != nil {
			return refused(err)
		}
		var e earlier
		if err := json.Unmarshal(body, &e); err != nil {
			return corrupt("its definition is not JSON: " + err.Error())
		}
		if e.ID != id {
			return Record{}, fmt.Errorf("%s: the stored definition is schedule %q's: refused", describe(id), e.ID)
		}
		rec.Doc = e.Doc
		return rec, nil
	}
	body, err := s.sign.Verify(s.boundDomain(id, rec.Created.UnixMilli(), rec.Version), []byte(h.def))
	if _, signed := handoff.Unsign([]byte(h.def)); err == nil && s.sign.Enabled() && signed {
		// (an unsigned one, which security.accept_unsigned lets through,
		// vouches for nothing)
		rec.Bound = true
	} else if err != nil {
		if body, err = s.sign.Verify(s.recordDomain(id), []byte(h.def)); err != nil {
			return refused(err)
		}
	}
	if !s.sign.Enabled() {
		// a reader without keys (signing turned off, or not yet on every
		// replica) reads a signed definition without its signature, which
		// is no key of a job (Put refuses a definition that ends as one)
		body, _ = handoff.Unsign(body)
	}
	if !json.Valid(body) {
		return corrupt("its definition is not JSON")
	}
	rec.Doc = body
	return rec, nil
}
