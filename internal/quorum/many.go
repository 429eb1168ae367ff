package quorum

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// manyChunk is the most calls of one script sent as one call of its many
// twin (lua/many.lua): a chunk runs atomically, so it bounds how long the
// master is busy with one (about a millisecond for a chunk of tick claims).
const manyChunk = 128

// runLines sends the EVALSHA lines of scripts (line i runs scripts[i]) to m
// in one pipeline and returns their answers, in order. With chunk,
// consecutive lines of the same script go as one call of the script's many
// twin, in chunks of at most manyChunk: one script call per chunk instead of
// one per line, which is what a script call costs the server beyond its
// commands. On a Redis Cluster every line goes alone (a chunk's keys would
// span slots). A server that does not know a script gets it whole (EVAL),
// which caches it there. Each answer is the command its line would have
// been alone: a call that failed inside a chunk carries its own error.
func (m *Master) runLines(ctx context.Context, scripts []*Script, lines [][]any, chunk bool) []*redis.Cmd {
	type sent struct {
		s     *Script // the script sent: a line's, or its many twin
		line  []any
		cmd   *redis.Cmd
		first int // the index of its first line
		n     int // lines it carries
	}
	var out []sent
	whole := map[*Script]bool{} // sent whole earlier in this pipeline
	for i := 0; i < len(lines); {
		n := 1
		if chunk && !m.cluster {
			for i+n < len(lines) && n < manyChunk && scripts[i+n] == scripts[i] {
				n++
			}
		}
		o := sent{s: scripts[i], line: lines[i], first: i, n: 1}
		if n > 1 {
			o = sent{s: scripts[i].many, line: manyLine(scripts[i], lines[i:i+n]), first: i, n: n}
		}
		if !m.knows(o.s) && !whole[o.s] && m.cluster {
			m.teach(ctx, o.s)
		}
		if !m.knows(o.s) && !whole[o.s] {
			// sent whole, not by hash: a NOSCRIPT answer would be sent
			// again after the lines behind it ran, out of order. On one
			// server once is enough: it caches the script before it runs
			// the lines behind, sent by hash. A Cluster's lines go to
			// several servers: each goes whole until the script is
			// loaded on every primary (teach)
			o.line = o.s.evalLine(o.line)
			whole[o.s] = !m.cluster
		}
		out = append(out, o)
		i += n
	}
	pipe := m.RDB.Pipeline()
	for k := range out {
		out[k].cmd = evalCmd(ctx, out[k].line)
		_ = pipe.Process(ctx, out[k].cmd)
	}
	_, _ = pipe.Exec(ctx) // each cmd carries its own error
	for _, o := range out {
		// a line that ran proves the server holds its script now. An
		// error answer proves nothing: the server's own BUSY or LOADING
		// refuses the call before the script is cached, and reads as a
		// script's error reply
		if o.cmd.Err() == nil && (o.line[0] == "eval" || whole[o.s]) {
			m.sentWhole(o.s)
		}
	}
	var again []int
	for k, o := range out {
		if noScript(o.cmd.Err()) {
			again = append(again, k)
		}
	}
	if len(again) > 0 {
		pipe := m.RDB.Pipeline()
		for _, k := range again {
			out[k].cmd = evalCmd(ctx, out[k].s.evalLine(out[k].line))
			_ = pipe.Process(ctx, out[k].cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	cmds := make([]*redis.Cmd, len(lines))
	for _, o := range out {
		cmd := o.cmd
		if o.n == 1 {
			cmds[o.first] = cmd
			continue
		}
		split(ctx, cmd, lines[o.first:o.first+o.n], cmds[o.first:o.first+o.n])
	}
	return cmds
}

// teach loads s on every primary of a Redis Cluster (SCRIPT LOAD, which
// go-redis sends to each), where an EVAL would teach only the node of its
// key and every line of a big pipeline would have to go whole: a Cluster
// master's connections are not counted, so it knows s from then on.
func (m *Master) teach(ctx context.Context, s *Script) {
	if m.RDB.ScriptLoad(ctx, s.src).Err() == nil {
		m.sentWhole(s)
	}
}

// knows tells whether s was sent whole (EVAL, which caches it on the
// server) over m's connections since the last one was dialed: a server that
// restarted since, which has forgotten its scripts, is reached only over a
// new connection. (SCRIPT FLUSH on a running server is not seen: a line
// answered NOSCRIPT is sent again, whole, after the pipeline.)
func (m *Master) knows(s *Script) bool {
	at, ok := m.scripts.Load(s)
	return ok && at.(uint64) == m.dials.Load()
}

// sentWhole notes that s reached the server whole with the connections
// dialed so far.
func (m *Master) sentWhole(s *Script) { m.scripts.Store(s, m.dials.Load()) }

// manyLine is one EVALSHA line of s.many carrying the calls of lines (each
// an EVALSHA line of s): the calls' keys in order, then ARGV = n, and per
// call its number of keys, its number of args and its args.
func manyLine(s *Script, lines [][]any) []any {
	nkeys, nargs := 0, 1
	for _, l := range lines {
		k := l[2].(int)
		nkeys += k
		nargs += 2 + len(l) - 3 - k
	}
	out := make([]any, 0, 3+nkeys+nargs)
	out = append(out, "evalsha", s.many.sha, nkeys)
	for _, l := range lines {
		k := l[2].(int)
		out = append(out, l[3:3+k]...)
	}
	out = append(out, len(lines))
	for _, l := range lines {
		k := l[2].(int)
		out = append(out, k, len(l)-3-k)
		out = append(out, l[3+k:]...)
	}
	return out
}

var errManyReply = errors.New("quorum: a chunk's answer does not list one answer per call")

// split hands each line of a many call its own answer: the call's error
// when the chunk failed as a whole (a connection lost, a timeout), else its
// element of the reply.
func split(ctx context.Context, cmd *redis.Cmd, lines [][]any, into []*redis.Cmd) {
	vals, err := cmd.Slice()
	if err == nil && len(vals) != len(lines) {
		err = errManyReply
	}
	for i, l := range lines {
		c := redis.NewCmd(ctx, l...)
		switch {
		case err != nil:
			c.SetErr(err)
		case vals[i] == nil:
			c.SetErr(redis.Nil)
		default:
			if e, ok := vals[i].(error); ok {
				c.SetErr(e)
			} else {
				c.SetVal(vals[i])
			}
		}
		into[i] = c
	}
}
