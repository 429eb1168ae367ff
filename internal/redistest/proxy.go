package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

const (
	// toxicTimeout bounds toxiproxy toxic changes, which synchronise with every
	// live connection and could otherwise block forever on a wedged link.
	toxicTimeout = 5 * time.Second
	// relistenTimeout bounds how long Restore retries re-listening on the
	// proxy's port.
	relistenTimeout = 2 * time.Second
)

// Proxy is a real TCP proxy (toxiproxy, in-process) between a client and a
// server, for latency, timeouts and cut connections. Point a client at Addr
// instead of the server's address. Its methods are safe for concurrent use.
//
// Toxiproxy pipes each direction of a connection through a chain of
// goroutines ("toxics"), newest last. If a connection is closed while a
// latency toxic is the last link holding several delayed chunks, toxiproxy
// blocks forever handing them to the dead writer. To avoid that, every
// latency toxic is followed by a pass-through "noop" toxic, and Cut and Close
// first append drop-everything toxics (the Blackhole ones), so all pending
// data drains into them and every toxiproxy goroutine exits.
type Proxy struct {
	mu       sync.Mutex
	tp       *toxiproxy.Proxy
	addr     string
	running  bool // listening and forwarding (not Cut)
	dropping bool // blackhole toxics installed (by Blackhole or Cut)
	closed   bool
	seq      int // makes toxic names unique
}

// NewProxy starts a proxy on a free loopback port forwarding to upstream
// ("host:port"). The caller must Close it.
func NewProxy(upstream string) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	tp := toxiproxy.NewProxy(srv, "redistest-"+upstream, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start proxy to %s: %w", upstream, err)
	}
	tp.Lock()
	addr := tp.Listen // the real address once started
	tp.Unlock()
	return &Proxy{tp: tp, addr: addr, running: true}, nil
}

// Addr returns the proxy's "127.0.0.1:PORT" listen address. It stays the same
// across Cut and Restore.
func (p *Proxy) Addr() string { return p.addr }

// AddLatency delays every chunk of data by d (rounded up to whole
// milliseconds), on existing and new connections. upstream=true delays
// client->server traffic (requests), false delays server->client traffic
// (replies). Calls stack: each adds another delay. Restore removes it.
func (p *Proxy) AddLatency(d time.Duration, upstream bool) error {
	if d < 0 {
		return fmt.Errorf("redistest: AddLatency: negative latency %v", d)
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	stream := "downstream"
	if upstream {
		stream = "upstream"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("redistest: AddLatency: proxy is closed")
	}
	p.seq++
	name := fmt.Sprintf("latency_%s_%d", stream, p.seq)
	if err := p.addToxic(fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, ms)); err != nil {
		return err
	}
	// Keep the latency toxic from being last in the chain (see Proxy).
	return p.addToxic(fmt.Sprintf(`{"name":"%s_guard","type":"noop","stream":%q}`, name, stream))
}

// CloseAfter closes each connection once it has carried n more bytes in one
// direction (toxiproxy "limit_data"): with upstream=false and n=0, a
// command reaches the server and runs, and its reply is lost with the
// connection. It applies to new connections too; Restore removes it.
func (p *Proxy) CloseAfter(n int64, upstream bool) error {
	stream := "downstream"
	if upstream {
		stream = "upstream"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("redistest: CloseAfter: proxy is closed")
	}
	p.seq++
	return p.addToxic(fmt.Sprintf(`{"name":"limit_%s_%d","type":"limit_data","stream":%q,"attributes":{"bytes":%d}}`, stream, p.seq, stream, n))
}

// Blackhole makes the proxy swallow all data in both directions while keeping
// connections open (toxiproxy "timeout" toxics with timeout 0), simulating a
// hung network: commands time out instead of failing fast. New connections
// are accepted but equally dead. Undo it with Restore.
func (p *Proxy) Blackhole() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("redistest: Blackhole: proxy is closed")
	}
	return p.drop()
}

// drop appends the blackhole toxics unless present. Callers hold p.mu.
func (p *Proxy) drop() error {
	if p.dropping {
		return nil
	}
	for _, stream := range []string{"upstream", "downstream"} {
		err := p.addToxic(fmt.Sprintf(`{"name":"blackhole_%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, stream, stream))
		if err != nil {
			return err
		}
	}
	p.dropping = true
	return nil
}

// addToxic adds a toxic described by JSON, bounded in time. Callers hold p.mu.
func (p *Proxy) addToxic(body string) error {
	return bounded("add toxic", func() error {
		_, err := p.tp.Toxics.AddToxicJson(strings.NewReader(body))
		return err
	})
}

// stop drops all in-flight data and stops listening, closing every
// connection. Callers hold p.mu.
func (p *Proxy) stop() error {
	if !p.running {
		return nil
	}
	err := p.drop() // let pending data drain somewhere; see Proxy
	p.tp.Stop()
	p.running = false
	return err
}

// Cut stops the proxy: every existing connection is closed (data still
// delayed by latency is dropped) and new connections are refused until
// Restore. Cutting a cut proxy is a no-op.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("redistest: Cut: proxy is closed")
	}
	return p.stop()
}

// Restore removes all toxics and, if the proxy was Cut, listens again on the
// same address. Connections that were blackholed are closed, because the data
// they swallowed is lost and the stream cannot resume; connections that only
// saw latency survive.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("redistest: Restore: proxy is closed")
	}
	if p.dropping {
		if err := p.stop(); err != nil {
			return err
		}
	}
	err := bounded("reset toxics", func() error {
		p.tp.Toxics.ResetToxics(context.Background())
		return nil
	})
	if err != nil {
		return err
	}
	p.dropping = false
	if p.running {
		return nil
	}
	deadline := time.Now().Add(relistenTimeout)
	for {
		err := p.tp.Start()
		if err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			p.running = true
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: Restore: listen again on %s: %w", p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the proxy and closes every connection through it (like Cut).
// It is idempotent. Toxiproxy tears connections down asynchronously, so its
// goroutines may linger for a few milliseconds after Close returns.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.stop()
}

// bounded runs fn but gives up after toxicTimeout. On timeout fn's goroutine
// is abandoned: it is stuck inside toxiproxy and cannot be cancelled.
func bounded(what string, fn func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- fn() }()
	t := time.NewTimer(toxicTimeout)
	defer t.Stop()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("redistest: proxy %s: %w", what, err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("redistest: proxy %s: toxiproxy did not finish within %v", what, toxicTimeout)
	}
}
