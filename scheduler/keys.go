package scheduler

import (
	_ "embed"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/quorum"
)

// jobKeys are the keys of one job; all share its hash tag. A tick's own key
// (tickKey) is both the tick's lease (value: the owner's token) and its
// record ("done" or "paused"), so a claim reads one key and a commit
// overwrites it. A tick recorded before its run has a second key
// (writerKey) naming the claim that recorded it. Only the common prefix is
// held (a replica holds a job per runtime schedule, a million at most): each
// key is made when a call needs it.
//
// A job's keys are made when asked for (Scheduler.keysOf), each in one
// concatenation, not kept: a scheduler may hold a million jobs.
type jobKeys struct {
	ns, job string
}

func newJobKeys(namespace, job string) jobKeys {
	return jobKeys{ns: namespace, job: job}
}

// key is the job's key NS:{JOB}:suffix.
func (k jobKeys) key(suffix string) string { return k.ns + ":{" + k.job + "}:" + suffix }

// tickKey is the key of tick at of the job.
func (k jobKeys) tickKey(at time.Time) string {
	return k.ns + ":{" + k.job + "}:tick:" + strconv.FormatInt(at.UnixMilli(), 10)
}

// paused is the key of the job's pause flag.
func (k jobKeys) paused() string { return k.key("paused") }

// mark is the key of the job's mark: its last decided tick.
func (k jobKeys) mark() string { return k.key("mark") }

// fence is the key of the job's fencing counter.
func (k jobKeys) fence() string { return k.key("fence") }

// countedKey is the key naming the replica that counted the ticks a
// catch-up from mark (unix ms) found missed (so they are logged and
// counted once).
func (k jobKeys) countedKey(mark int64) string {
	return k.ns + ":{" + k.job + "}:counted:" + strconv.FormatInt(mark, 10)
}

// writerKey is the key naming the claim that recorded a tick done before
// its run ("<token>:<fence>"), beside the tick's key (see
// lua/commit_owned.lua). The tick's own key still says just "done", which
// replicas of every version read as done.
func writerKey(tick string) string { return tick + ":by" }

// writtenBy tells whether the writer record v (writerKey's value) names the
// claim of token.
func writtenBy(v, token string) bool {
	t, _, ok := strings.Cut(v, ":")
	return ok && token != "" && t == token
}

// membersKey is the sorted set of live scheduler replicas on the first lock
// master (see membershipLoop): member the replica id, score its last
// heartbeat in unix ms by the replica's own clock.
func (s *Scheduler) membersKey() string { return s.opts.namespace + ":replicas" }

// PauseKey is the Redis key whose presence pauses a job on every replica.
func PauseKey(namespace, job string) string { return newJobKeys(namespace, job).paused() }

// TickKey is the Redis key of job's tick at on the lock masters: while a
// replica dispatches the tick it holds the owner's token (a hex lease),
// once decided "done", "missed" or "paused", until the record expires (the
// job's starting deadline and margins after the tick).
func TickKey(namespace, job string, at time.Time) string {
	return newJobKeys(namespace, job).tickKey(at)
}

// recordTTL is how long a tick's record of j outlives the tick: its starting
// deadline, the lease ttl, twice the skew bound and the record margin.
func (s *Scheduler) recordTTL(j *Job) time.Duration {
	return j.StartingDeadline + s.opts.leaseTTL + 2*s.opts.maxSkew + s.opts.recordMargin
}

// The scripts a tick goes through on every lock master, each in lua/ with
// its KEYS and ARGV contract at its head.
var (
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/commit_owned.lua
	commitOwnedSrc string
	//go:embed lua/unrecord.lua
	unrecordSrc string

	// the claim grants and fences: it carries the quorum prelude (q_guard,
	// q_fence), shared with the lock acquire; the scripts that read the
	// mark or the fencing counter carry it for q_count
	claimScript   = quorum.NewGuardedScript(claimSrc)
	commitScript  = quorum.NewGuardedScript(commitSrc)
	releaseScript = quorum.NewScript(releaseSrc)
	extendScript  = quorum.NewScript(extendSrc)
	raiseScript   = quorum.NewGuardedScript(raiseSrc)
	// commits before the dispatch, token-checked (jobs that commit first)
	commitOwnedScript = quorum.NewGuardedScript(commitOwnedSrc)
	// turns a claim's own "done" on a minority into a not-run record
	unrecordScript = quorum.NewScript(unrecordSrc)
)

// keysOf is job j's keys in this scheduler's namespace.
func (s *Scheduler) keysOf(j *Job) jobKeys { return newJobKeys(s.opts.namespace, j.Name) }
