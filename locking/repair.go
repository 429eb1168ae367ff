package locking

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Quorum mode keeps a permanent marker key on every master. A master without
// it has restarted empty: it forgot the locks it held and its fencing
// counters, so it must not vote. Repair copies the largest fencing counter of
// every lock from a majority of the other masters (any fence ever issued sits
// on a majority, so this majority has seen it), then sets the marker with a
// quarantine: the master votes again only once every lock it forgot has
// expired on the others.
//
// A fresh deployment, where no master carries a marker yet, marks every
// master at once without quarantine. Counters that were never seen start at
// the master's clock in microseconds, so fences stay monotonic even then.

// MarkerKey is the key every master of a quorum carries while it may vote.
// Packages that run their own scripts on the same masters (the scheduler's
// tick claims) check it the way the acquire script does: absent means the
// master restarted empty and must not vote; a value above the server's time
// in milliseconds means it is in quarantine until then.
func (c *Client) MarkerKey() string { return c.markerKey() }

// Prepare contacts every master: it checks the eviction policy, marks the
// masters of a fresh quorum, and starts the repair of any master that
// restarted empty. Locks do this on their own; callers that run their own
// scripts on the masters call Prepare first, and again when a master answers
// that it carries no marker. It returns an error only when no master answered.
func (c *Client) Prepare(ctx context.Context) error {
	ttl := time.Second
	rs := c.fanout(ctx, c.masterTimeout(ttl), func(ctx context.Context, m *master) (any, error) {
		return m.rdb.Exists(ctx, c.markerKey()).Result()
	}, nil)
	var errs []error
	unmarked := 0
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, MasterError{r.m.idx, r.m.addr, r.err})
			continue
		}
		if r.val.(int64) == 0 {
			unmarked++
		}
	}
	if len(errs) == len(rs) {
		return fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
	}
	if len(c.masters) == 1 || unmarked == 0 {
		return nil
	}
	if c.markFresh(ctx, ttl) {
		return nil
	}
	for _, r := range rs {
		if r.err == nil && r.val.(int64) == 0 {
			c.repairLater(r.m)
		}
	}
	return nil
}

// unmarked counts the acquire answers of masters without a marker.
func unmarked(rs []reply) int {
	n := 0
	for _, r := range rs {
		if code, _, ok := acquireAnswer(r.val); ok && r.err == nil && code == -1 {
			n++
		}
	}
	return n
}

// markFresh marks every master at once when none carries a marker yet and a
// quorum answers: a fresh deployment. It reports whether it marked any.
func (c *Client) markFresh(ctx context.Context, ttl time.Duration) bool {
	rs := c.fanout(ctx, c.masterTimeout(ttl), func(ctx context.Context, m *master) (any, error) {
		return m.rdb.Exists(ctx, c.markerKey()).Result()
	}, nil)
	answered := 0
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		if r.val.(int64) == 1 {
			return false // not fresh: the unmarked ones restarted; repair them
		}
		answered++
	}
	if answered < c.quorum {
		return false
	}
	marked := 0
	for _, r := range c.fanout(ctx, c.masterTimeout(ttl), func(ctx context.Context, m *master) (any, error) {
		return c.scripts.mark.Run(ctx, m.rdb, []string{c.markerKey()}, 0).Int64()
	}, nil) {
		if r.err == nil && r.val.(int64) == 1 {
			marked++
		}
	}
	if marked > 0 {
		c.opts.logger.Printf("locking: fresh quorum: marked %d masters", marked)
	}
	return true
}

// repairLater starts one background repair of m unless one is running.
func (c *Client) repairLater(m *master) {
	m.mu.Lock()
	if m.repairing || c.closed() {
		m.mu.Unlock()
		return
	}
	m.repairing = true
	m.mu.Unlock()
	if !c.bg.spawn(func() {
		err := c.repair(c.ctx, m)
		if err != nil && !c.closed() {
			c.opts.logger.Printf("locking: repair of master %d (%s) failed, will retry on next contact: %v", m.idx, m.addr, err)
		}
		m.mu.Lock()
		m.repairing = false
		m.mu.Unlock()
	}) {
		m.mu.Lock()
		m.repairing = false
		m.mu.Unlock()
	}
}

// repair brings one unmarked master back into quorums.
func (c *Client) repair(ctx context.Context, m *master) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	marker := c.markerKey()

	var marked, unmarked []*master
	for _, o := range c.masters {
		if o == m {
			continue
		}
		n, err := o.rdb.Exists(ctx, marker).Result()
		switch {
		case err != nil:
		case n == 1:
			marked = append(marked, o)
		default:
			unmarked = append(unmarked, o)
		}
	}
	if len(marked) == 0 {
		// nobody carries a marker: a fresh deployment (or every master lost
		// its data at once, which no scheme can recover locks from). Only
		// proceed when a quorum of masters is reachable to say so.
		if len(unmarked)+1 < c.quorum {
			return fmt.Errorf("no master carries a marker and only %d are reachable", len(unmarked)+1)
		}
		for _, o := range append(unmarked, m) {
			if _, err := c.scripts.mark.Run(ctx, o.rdb, []string{marker}, 0).Result(); err != nil {
				return fmt.Errorf("marking master %d: %w", o.idx, err)
			}
		}
		c.opts.logger.Printf("locking: fresh quorum: marked %d masters", len(unmarked)+1)
		return nil
	}

	need := min(c.quorum, len(c.masters)-1)
	if len(marked) < need {
		return fmt.Errorf("master %d restarted empty; repair needs the counters of %d marked masters, %d reachable", m.idx, need, len(marked))
	}
	pattern := escapeGlob(c.opts.prefix) + "{*}:fence"
	highest := map[string]int64{}
	for _, o := range marked[:need] {
		iter := o.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			vals, err := o.rdb.MGet(ctx, batch...).Result()
			if err != nil {
				return err
			}
			for i, v := range vals {
				if s, ok := v.(string); ok {
					if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > highest[batch[i]] {
						highest[batch[i]] = n
					}
				}
			}
			batch = batch[:0]
			return nil
		}
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scanning master %d: %w", o.idx, err)
		}
		if err := flush(); err != nil {
			return fmt.Errorf("reading master %d: %w", o.idx, err)
		}
	}
	if err := c.scripts.raise.Load(ctx, m.rdb).Err(); err != nil {
		return fmt.Errorf("loading script on master %d: %w", m.idx, err)
	}
	var ks []string
	var vs []any
	flush := func() error {
		if len(ks) == 0 {
			return nil
		}
		// one key per call: counters of different locks may sit in different
		// Cluster slots
		pipe := m.rdb.Pipeline()
		for i := range ks {
			c.scripts.raise.Run(ctx, pipe, ks[i:i+1], vs[i])
		}
		_, err := pipe.Exec(ctx)
		ks, vs = ks[:0], vs[:0]
		return err
	}
	for k, v := range highest {
		ks, vs = append(ks, k), append(vs, strconv.FormatInt(v, 10))
		if len(ks) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("raising counters on master %d: %w", m.idx, err)
	}
	if _, err := c.scripts.mark.Run(ctx, m.rdb, []string{marker}, c.opts.quarantine.Milliseconds()).Result(); err != nil {
		return fmt.Errorf("marking master %d: %w", m.idx, err)
	}
	c.opts.logger.Printf("locking: master %d (%s) restarted empty: copied %d fencing counters, votes again after %v", m.idx, m.addr, len(highest), c.opts.quarantine)
	return nil
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}
