package quorum

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors a master answers in place of a call it was not allowed to receive.
// Package locking exports ErrQuarantine and ErrEviction: their texts begin
// with the name of the package users match them by.
var (
	// ErrRestarted: the master restarted (empty, or from a snapshot older
	// than its last write) and is not repaired yet; it grants nothing.
	ErrRestarted = errors.New("restarted; kept out of quorums until repaired")
	// ErrQuarantine: the master was repaired after a restart (or found
	// without a marker: brand-new) and waits until every lock its previous
	// process may have granted has expired.
	ErrQuarantine = errors.New("locking: in its restart quarantine")
	// ErrReconnected: the answer came over a connection dialed after the
	// last check, and the master could not be confirmed to be the same process.
	ErrReconnected = errors.New("reconnected during the call to a server not confirmed as the same process")
	// ErrTooOld: the server is older than the scripts need.
	ErrTooOld = errors.New("Redis too old")
	// ErrEviction: the master may evict keys and the group refuses such masters.
	ErrEviction = errors.New("locking: master may evict keys")
)

// errNoIdentity: the server does not report a run_id and fresh deployments
// were not opted in to.
var errNoIdentity = errors.New("no server identity")

// Why a master is kept out of quorums after a restart: Status.Why and
// QuarantineError.Reason.
const (
	// WhyNoMarker: the master carried no marker when it was found.
	WhyNoMarker = "no marker: a brand-new server or one restarted empty"
	// WhyOtherProcess: its marker named another server process.
	WhyOtherProcess = "marker of another server process: reloaded from a snapshot"
	// whyUnknown: a marker written before markers recorded why.
	whyUnknown = "repaired after a restart"
)

// QuarantineError is ErrQuarantine with the master, why it waits, and until
// when.
type QuarantineError struct {
	Master int           // the master's position in the list given to New
	Addr   string        // its address, without credentials
	Reason string        // WhyNoMarker, WhyOtherProcess, or another reason
	Until  time.Time     // the end of the quarantine, by the master's clock
	Left   time.Duration // the time left when the error was made, by this process's clock
}

// Error says what happened and, for a master found without a marker, how a
// brand-new set of masters skips the wait. (A master's error names the
// master already: see the callers.)
func (e *QuarantineError) Error() string {
	s := fmt.Sprintf("in its restart quarantine until %s by its clock (%v more): %s",
		e.Until.UTC().Format(time.RFC3339), e.Left.Round(time.Second), e.Reason)
	if e.Reason == WhyNoMarker {
		s += "; " + InitHint
	}
	return s
}

// InitHint says that the quarantine ends by itself and how a brand-new set
// of masters skips it: marked before any client uses it (once one has, it
// carries that client's marker and baton init refuses it).
const InitHint = "the wait ends by itself; a brand-new set of masters skips it only when marked before any client uses it: `baton init --config FILE` (baton lock --redis's masters: `baton init --redis URL`; Go: locking.Client.InitFresh)"

// Is makes errors.Is(err, ErrQuarantine) hold.
func (e *QuarantineError) Is(target error) bool { return target == ErrQuarantine }

// Master is one Redis master of a group.
type Master struct {
	Idx  int                   // position in the list given to New
	Addr string                // address, without credentials
	RDB  redis.UniversalClient // the caller's client
	g    *Group

	batch   *batcher
	tracked bool // restarts detected (standalone server)
	cluster bool // a Redis Cluster: each script call goes alone (see runLines)

	dials   atomic.Uint64             // connections dialed so far (the dial hook)
	scripts sync.Map                  // *Script: dials when it was last sent whole (see knows)
	broken  atomic.Uint64             // reads and writes that failed on its connections
	voting  atomic.Pointer[Admission] // as of the last check that let it vote; nil: check first
	known   atomic.Pointer[Status]    // as the last check found it (Known); nil: not checked yet

	mu        sync.Mutex    // held through checks: one at a time
	state     int           // stUnknown ... stRefused
	checked   uint64        // dials when the last check began
	runID     string        // of the process the last check saw
	votesAt   time.Time     // end of the quarantine, local clock
	until     time.Time     // end of the quarantine, the master's clock
	why       string        // why it is in quarantine (Why...)
	warned    int64         // BORN of the last quarantine warned of
	fatal     error         // refused for good
	looked    bool          // configuration read and reported
	repairing chan struct{} // closed when the running repair ends; nil: none runs
}

const (
	stUnknown = iota
	stVoting
	stQuarantine
	stRestarted
)

// dialCounter counts the connections dialed to a master and, through
// brokenConn, the reads and writes that failed on them.
type dialCounter struct{ m *Master }

func (h dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.m.dials.Add(1)
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return brokenConn{Conn: c, m: h.m}, nil
	}
}

// brokenConn counts failed reads and writes: go-redis sends a command again
// only after its connection failed (a lost reply), so a call during which
// none failed was sent once, however many connections the pool dialed.
type brokenConn struct {
	net.Conn
	m *Master
}

func (c brokenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.m.broken.Add(1)
	}
	return n, err
}

func (c brokenConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.m.broken.Add(1)
	}
	return n, err
}

// NetConn lets go-redis reach the socket for its idle-connection checks.
func (c brokenConn) NetConn() net.Conn                                   { return c.Conn }
func (dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Admission is what a call was admitted under: the dial count of the check
// that let the master vote, the server process that check saw, and the
// failed reads and writes before the call.
type Admission struct {
	dials  uint64
	runID  string
	broken uint64
}

// Admit returns what a call may be sent under (pass it to Trust with the
// answer), or the reason the master may not receive calls now. It checks the
// master first when a connection was dialed since the last check.
func (m *Master) Admit(ctx context.Context) (Admission, error) {
	if !m.tracked {
		return Admission{}, nil
	}
	broken := m.broken.Load()
	if a := m.voting.Load(); a != nil && a.dials == m.dials.Load() {
		b := *a
		b.broken = broken
		return b, nil
	}
	a, err := m.admitSlow(ctx)
	a.broken = broken
	return a, err
}

func (m *Master) admitSlow(ctx context.Context) (Admission, error) {
	a, err, repair := m.admitLocked(ctx)
	if repair == nil {
		return a, err
	}
	// a restarted master is repaired before the call goes on (a brand-new
	// deployment is marked on its first call); waiting is bounded by ctx
	select {
	case <-repair:
	case <-ctx.Done():
		return a, err
	}
	a, err, _ = m.admitLocked(ctx)
	return a, err
}

// admitLocked is Admit's slow path under m.mu; for a restarted master it
// also returns the channel closed when its repair ends.
func (m *Master) admitLocked(ctx context.Context) (Admission, error, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fatal != nil {
		return Admission{}, m.fatal, nil
	}
	// a check that began at dial count d speaks for every connection
	// dialed before it: such a connection leads to the process the check
	// saw, or to an earlier one, which is dead (one port, one process), so
	// a call over it fails. Calls are admitted under the check's count;
	// Trust confirms answers that came after later dials.
	if m.state == stUnknown || m.checked != m.dials.Load() {
		if err := m.checkLocked(ctx); err != nil {
			return Admission{}, err, nil
		}
	}
	a := &Admission{dials: m.checked, runID: m.runID}
	switch m.state {
	case stVoting:
		m.voting.Store(a)
		return *a, nil, nil
	case stQuarantine:
		if left := time.Until(m.votesAt); left > 0 {
			return Admission{}, &QuarantineError{Master: m.Idx, Addr: m.Addr, Reason: m.why, Until: m.until, Left: left}, nil
		}
		m.state = stVoting
		m.voting.Store(a)
		return *a, nil, nil
	default:
		return Admission{}, ErrRestarted, m.g.repairLater(m)
	}
}

// Trust reports whether an answer to a call admitted under a came from the
// process it was admitted for: no connection was dialed meanwhile, or INFO
// confirms that process still runs and still votes (a run_id is never
// reused, so a call that reached another process, e.g. re-sent by go-redis
// on a new connection after a restart, is never trusted, whatever that
// process's state is now). resent is true when a read or write failed on
// one of the master's connections during the call: go-redis may have sent it
// twice (a retry after a lost reply). A connection dialed only because the
// pool grew does not count.
func (m *Master) Trust(ctx context.Context, a Admission) (ok, resent bool) {
	resent = m.broken.Load() != a.broken
	if !m.tracked || m.dials.Load() == a.dials {
		return true, resent
	}
	m.voting.Store(nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	// a connection that broke under the call may have left others broken
	// in the pool: a second check runs over a new one
	err := m.checkLocked(context.WithoutCancel(ctx))
	if err != nil && IsNetErr(err) {
		err = m.checkLocked(context.WithoutCancel(ctx))
	}
	if err != nil || m.state == stRestarted || m.runID != a.runID {
		return false, resent
	}
	return true, resent
}

// Invalidate makes the next call check the master again (a script answered
// that its marker is missing: flushed while running).
func (m *Master) Invalidate() {
	m.mu.Lock()
	m.state = stUnknown
	m.voting.Store(nil)
	m.mu.Unlock()
}

// checkTimeout bounds one check when the caller's context has no deadline.
const checkTimeout = 2 * time.Second

// checkLocked reads the server's identity and the master's marker and sets
// the master's state. Callers hold m.mu.
func (m *Master) checkLocked(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, checkTimeout)
		defer cancel()
	}
	d := m.dials.Load()
	id, err := m.identity(ctx)
	if errors.Is(err, errNoIdentity) {
		m.fatal = err
	}
	if err != nil {
		return err
	}
	if !m.looked {
		if err := m.look(ctx, id); err != nil {
			return err
		}
	}
	m.checked, m.runID = d, id.runID
	marker, ok := parseMarker(id.marker)
	votes := time.UnixMilli(marker.born).Add(m.g.opts.Quarantine) // server time
	switch {
	case !ok || marker.runID != id.runID:
		m.state = stRestarted
		m.g.repairLater(m)
	case marker.fresh || !id.now.Before(votes):
		m.state = stVoting
	default:
		m.state, m.votesAt = stQuarantine, time.Now().Add(votes.Sub(id.now))
		m.until, m.why = votes, marker.reason()
		if m.warned != marker.born {
			m.warned = marker.born // once per quarantine, in each process
			m.g.opts.Logger.Printf("%s", QuarantineWarning(m.Idx, m.Addr, m.why, votes, m.votesAt))
		}
	}
	m.noteKnown()
	return nil
}

// noteKnown records the state the check found, for Known, which must not
// wait for m.mu: a check holds it while the master answers, which may be
// for as long as the client's timeouts. Callers hold m.mu.
func (m *Master) noteKnown() {
	st := &Status{Idx: m.Idx, Addr: m.Addr, State: StateVoting}
	switch m.state {
	case stQuarantine:
		st.State, st.Why, st.Until, st.UntilLocal = StateQuarantine, m.why, m.until, m.votesAt
	case stRestarted:
		st.State = StateRepairing
	}
	m.known.Store(st)
}

// QuarantineWarning is the line logged when a master is found in its
// quarantine: the master, why, until when by its clock and by this
// process's (until, local), and for a master found without a marker how a
// brand-new set skips the wait.
func QuarantineWarning(idx int, addr, why string, until, local time.Time) string {
	s := fmt.Sprintf("quorum: master %d (%s) is in its restart quarantine until %s by its clock (%s here, in %v): %s; it grants no lock and decides no tick until then",
		idx, addr, until.UTC().Format(time.RFC3339), local.Format(time.RFC3339), time.Until(local).Round(time.Second), why)
	if why == WhyNoMarker {
		s += "; " + InitHint
	}
	return s
}

// identity is what a check reads from a master.
type identity struct {
	runID     string // "" when the server does not report one (not Redis)
	version   string
	uptime    time.Duration // a lower bound: INFO's whole seconds, minus one
	now       time.Time     // the server's clock (TIME)
	hasMarker bool
	marker    string
}

// identity reads INFO server and the marker. (Two plain commands rather
// than a pipeline: they share the regular pool with the calls they vouch
// for, whose connections are the freshest.)
func (m *Master) identity(ctx context.Context) (identity, error) {
	var id identity
	info := m.RDB.Info(ctx, "server")
	if err := info.Err(); err != nil && IsNetErr(err) {
		return id, err
	}
	mk := m.RDB.Get(ctx, m.g.opts.Marker)
	if err := mk.Err(); err != nil && err != redis.Nil {
		return id, err
	}
	now, err := m.RDB.Time(ctx).Result()
	if err != nil {
		return id, err
	}
	id.now = now
	id.marker, id.hasMarker = mk.Val(), mk.Err() == nil
	if err := info.Err(); err != nil {
		if IsNetErr(err) {
			return id, err
		}
		if !m.g.opts.Fresh {
			return id, fmt.Errorf("%w: INFO server failed (%v): baton reads the server's run_id to detect restarts; allow INFO, or opt in to fresh deployments for a server that cannot report it", errNoIdentity, err)
		}
		return id, nil // a server without INFO (baton dev's embedded one): no identity
	}
	for _, line := range strings.Split(info.Val(), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			id.runID = v
		case "redis_version":
			id.version = v
		case "uptime_in_seconds":
			// floor(now) - floor(start): up to a second more than the
			// real uptime; one second less is a lower bound
			s, _ := strconv.ParseInt(v, 10, 64)
			id.uptime = max(time.Duration(s-1)*time.Second, 0)
		}
	}
	return id, nil
}

// look reads the master's version, eviction policy and persistence settings
// once and reports them. Callers hold m.mu.
func (m *Master) look(ctx context.Context, id identity) error {
	if id.version != "" && !atLeast(id.version, 6, 2) {
		m.fatal = fmt.Errorf("%w: version %s; baton's scripts need 6.2 or later (SET ... GET)", ErrTooOld, id.version)
		return m.fatal
	}
	res, err := m.RDB.ConfigGet(ctx, "*").Result()
	if err != nil {
		if IsNetErr(err) {
			return err
		}
		m.looked = true // CONFIG may be disabled (managed Redis): say so once
		m.g.opts.Logger.Printf("quorum: master %d (%s): cannot read its configuration (%v); make sure maxmemory-policy is noeviction and know what its persistence brings back after a restart", m.Idx, m.Addr, err)
		return nil
	}
	m.looked = true
	policy := res["maxmemory-policy"]
	if policy != "" && policy != "noeviction" {
		if m.g.opts.RefuseEviction {
			m.fatal = fmt.Errorf("%w: maxmemory-policy is %s, locks need noeviction", ErrEviction, policy)
			return m.fatal
		}
		m.g.opts.Logger.Printf("quorum: master %d (%s): maxmemory-policy is %s: under memory pressure Redis may evict locks and fencing counters; set noeviction", m.Idx, m.Addr, policy)
	}
	persist := "no persistence: a restart comes back empty"
	switch {
	case res["appendonly"] == "yes":
		persist = fmt.Sprintf("AOF with appendfsync %s: a restart comes back with the writes of the last %s", res["appendfsync"], fsyncLoss(res["appendfsync"]))
	case strings.TrimSpace(res["save"]) != "":
		persist = fmt.Sprintf("RDB snapshots (save %q): a restart comes back with the last snapshot, older than the last writes", res["save"])
	}
	m.g.infof("quorum: master %d (%s): Redis %s, %s; either way a restart is detected, and the master votes again once up for %v (the restart quarantine)", m.Idx, m.Addr, id.version, persist, m.g.opts.Quarantine)
	return nil
}

func fsyncLoss(mode string) string {
	switch mode {
	case "always":
		return "moment (fsync always)"
	case "no":
		return "tens of seconds at most (the OS decides when to flush)"
	}
	return "second lost at most"
}

// atLeast compares a "major.minor.patch" version with major.minor.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	a, _ := strconv.Atoi(parts[0])
	b := 0
	if len(parts) > 1 {
		b, _ = strconv.Atoi(parts[1])
	}
	return a > major || a == major && b >= minor
}

// marker is a marker key's value: "RUNID FLOOR BORN KIND". RUNID is the
// server process it was written under ("-" for a server that reports none),
// FLOOR the fence floor in microseconds, BORN the moment (server ms) before
// which the master may have lost writes (0 when fresh), KIND why it was
// written: "fresh" (a brand-new set, voting at once), "empty" (no marker was
// found), "snapshot" (another process's marker was found); markers of
// earlier versions have no KIND. See lua/prelude.lua and lua/mark.lua. The
// master votes from BORN plus the quarantine on.
type marker struct {
	runID string
	floor int64
	born  int64
	fresh bool
	kind  string
}

// Marker kinds (see marker).
const (
	kindFresh    = "fresh"
	kindEmpty    = "empty"
	kindSnapshot = "snapshot"
)

// reason is why a master with this marker waits out a quarantine.
func (mk marker) reason() string {
	switch mk.kind {
	case kindEmpty:
		return WhyNoMarker
	case kindSnapshot:
		return WhyOtherProcess
	}
	return whyUnknown
}

func parseMarker(v string) (marker, bool) {
	f := strings.Fields(v)
	if len(f) < 3 {
		return marker{}, false // none, or written by an earlier format
	}
	// a floor that is no counter is no marker, as in q_guard: the master is
	// repaired (marked anew) rather than fencing from nonsense
	floor, ok := ParseCounter(f[1])
	if !ok {
		return marker{}, false
	}
	born, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return marker{}, false
	}
	id := f[0]
	if id == "-" {
		id = ""
	}
	mk := marker{runID: id, floor: floor, born: born}
	if len(f) > 3 {
		mk.kind = f[3]
		mk.fresh = mk.kind == kindFresh
	}
	return mk, true
}
