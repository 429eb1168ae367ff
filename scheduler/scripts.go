package scheduler

import (
	_ "embed"

	"github.com/batonhq/baton/internal/quorum"
)

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
