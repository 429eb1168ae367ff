// Package formats names the version of every format baton keeps in Redis
// or sends through it, so that replicas of different baton versions can run
// side by side during a rolling deploy.
//
// A format carries its version when it is a JSON object or a stream entry
// (a "v" member or field; a value without one is version 1), or implies it
// by its key name and shape (the space-separated marker, a tick record's
// word, a counter). Readers ignore JSON members and stream fields they do not
// know, so adding one is no new version: an older replica reads a newer
// replica's value as it did before. A change an older replica would misread
// (a member removed or meaning something else, a new key layout) bumps the
// version, and docs/operating.md says whether that upgrade can roll or needs
// a drain. Every format is listed in All, and docs/operating.md's formats
// table lists each with the same version (TestFormatsTableMatchesAll).
package formats

// Versions of the formats that carry theirs.
const (
	// TaskPayload is the "v" member of a baton:run task's JSON payload
	// (internal/handoff, asynq's task hash on the queue Redis). 2 added
	// "await" (a chain's backfilled link waits for its parents), which a
	// replica that reads 1 would run at once: a payload without it is
	// still written as 1, which every release reads.
	TaskPayload = 2
	// HistoryEvent is the "v" field of an entry in a job's history stream
	// NS:{history:JOB} (internal/runlog).
	HistoryEvent = 1
	// PauseFlag is the "v" member of a pause flag's JSON value
	// NS:{JOB}:paused on the lock masters (baton).
	PauseFlag = 1
	// HolderRecord is the "v" member of the execution holder record
	// NS:{exec:JOB}:holder (internal/worker).
	HolderRecord = 1
	// SlotHolderRecord is the "v" member of a limit slot's holder record
	// NS:{limit:LIMIT}:holder:I (internal/worker).
	SlotHolderRecord = 1
	// RosterEntry is the "v" member of a replica's JSON entry in the roster
	// hash {NS:roster} (internal/roster). 2 added max_runs (absent before: unknown).
	RosterEntry = 2
	// CancelRequest is the "v" member of a replace request published on
	// NS:cancel:JOB (internal/worker); nothing keeps it.
	CancelRequest = 1
)

// Format is one format baton keeps in Redis.
type Format struct {
	// Name names it in docs/operating.md's formats table.
	Name string
	// Version is its current version.
	Version int
	// Carried tells whether the value holds its version ("v"); false:
	// implied by the key name and the value's shape.
	Carried bool
}

// All lists every format baton keeps in Redis or sends through it.
var All = []Format{
	{"tick record", 1, false},
	{"tick writer", 1, false},
	{"tick skip", 1, false},
	{"job mark", 1, false},
	{"dispatch fence", 1, false},
	{"counted mark", 1, false},
	{"pause flag", PauseFlag, true},
	{"quorum marker", 1, false},
	{"tick binding", 1, false},
	{"task payload", TaskPayload, true},
	{"history event", HistoryEvent, true},
	{"roster entry", RosterEntry, true},
	{"roster job list", 1, false},
	{"roster clock step", 1, false},
	{"tick ledger record", 1, false},
	{"holder record", HolderRecord, true},
	{"slot holder record", SlotHolderRecord, true},
	{"chain outcome record", 1, false},
	{"buffer entries", 1, false},
	{"max_runs count", 1, false},
	{"replace request", CancelRequest, true},
	{"lock keys", 1, false},
	{"forgotten floor", 1, false},
	{"election leader record", 1, false},
	{"runtime schedule record", 1, false},
	{"runtime schedule change", 1, false},
	{"runtime schedule mark", 1, false},
}
