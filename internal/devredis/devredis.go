// Package devredis is the embedded Redis-compatible server of `baton dev`
// (miniredis, in memory), with its clock kept in step with real time, and
// package batontest's, whose clock a test moves (StartAt). Of the binaries,
// only the one built with the "dev" build tag imports it: the production
// binary carries no test server.
package devredis

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// clockStep is how often the server's clock is advanced: miniredis expires
// keys only when told time has passed.
const clockStep = 10 * time.Millisecond

// Server is a running embedded server.
type Server struct {
	mr   *miniredis.Miniredis
	done chan struct{}
	wg   sync.WaitGroup
}

// Start starts a server on a free 127.0.0.1 port.
func Start() (*Server, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	s := &Server{mr: mr, done: make(chan struct{})}
	// advance the clock by the real time elapsed, so keys expire in real
	// time (miniredis only expires keys on FastForward); TIME is answered
	// from the real clock already
	s.wg.Go(func() {
		t := time.NewTicker(clockStep)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-s.done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	})
	return s, nil
}

// StartAt starts a server on a free 127.0.0.1 port whose clock stands at t
// until SetTime moves it: TIME and stream IDs read it, and keys expire as it
// passes them (batontest's fake clock drives it).
func StartAt(t time.Time) (*Server, error) {
	mr := miniredis.NewMiniRedis()
	mr.SetTime(t)
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &Server{mr: mr, done: make(chan struct{})}, nil
}

// SetTime moves the clock of a server started with StartAt to t; the keys
// whose expiry it passes expire.
func (s *Server) SetTime(t time.Time) { s.mr.SetTime(t) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.mr.Addr() }

// URL is a redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.mr.Addr() + "/0" }

// Close stops the clock and the server.
func (s *Server) Close() {
	close(s.done)
	s.wg.Wait()
	s.mr.Close()
}
