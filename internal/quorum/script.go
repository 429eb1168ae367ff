package quorum

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/prelude.lua
	preludeSrc string
	//go:embed lua/mark.lua
	markSrc string
	//go:embed lua/many.lua
	manySrc string
	//go:embed lua/forget.lua
	forgetSrc string
)

// Script is a Lua script with what its command lines need made once: the hot
// paths build "EVALSHA sha numkeys keys... args..." in one slice. Every
// script runs by hash and is sent whole only when the server answers
// NOSCRIPT (a restart, SCRIPT FLUSH).
type Script struct {
	*redis.Script
	src  string
	sha  any     // the hash, boxed once
	many *Script // runs this script once per call of a chunk (lua/many.lua)
}

// NewScript returns the script with source src.
func NewScript(src string) *Script { return pair("", src) }

// pair returns the script head + src and its chunk form: head once, then
// src as the function each call of a chunk runs.
func pair(head, src string) *Script {
	s := newScript(head + src)
	s.many = newScript(head + "local function one(KEYS, ARGV)\n" + src + "\nend\n" + manySrc)
	return s
}

func newScript(src string) *Script {
	s := redis.NewScript(src)
	return &Script{Script: s, src: src, sha: s.Hash()}
}

// NewGuardedScript returns the script with the prelude (lua/prelude.lua:
// q_time, q_guard, q_fence...) in front of src. The prelude's memo table
// (q_memo) is made once per script call, in front of the function each call
// of a chunk runs, so the calls of a chunk read TIME and the marker once.
func NewGuardedScript(src string) *Script { return pair("local q_memo = {}\n", preludeSrc+src) }

// Line returns the EVALSHA command line for keys and args.
func (s *Script) Line(keys []string, args ...any) []any {
	l := make([]any, 0, 3+len(keys)+len(args))
	l = append(l, "evalsha", s.sha, len(keys))
	for _, k := range keys {
		l = append(l, k)
	}
	return append(l, args...)
}

// evalLine is line with the script's source instead of its hash, for a server
// that answered NOSCRIPT: EVAL also caches it there.
func (s *Script) evalLine(line []any) []any {
	l := make([]any, len(line))
	copy(l, line)
	l[0], l[1] = "eval", s.src
	return l
}
