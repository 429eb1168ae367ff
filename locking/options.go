package locking

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// MinTTL is the shortest lock ttl accepted. Shorter leases would spend most of
// their life on the safety margin.
const MinTTL = 20 * time.Millisecond

// Option configures a Client.
type Option func(*options)

type options struct {
	prefix        string
	lateness      time.Duration
	masterTimeout time.Duration
	quarantine    time.Duration
	fresh         bool
	refuseEvict   bool
	logger        *slog.Logger // nil: none
}

func defaultOptions() options {
	return options{
		prefix:     "baton:lock:",
		lateness:   10 * time.Millisecond,
		quarantine: time.Minute,
	}
}

// WithPrefix sets the prefix of every key and channel the client uses.
// Default "baton:lock:". A lock named K lives in PREFIX{K} (the braces are a
// Redis Cluster hash tag, so a lock's keys share a slot).
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLateness sets the fixed part of the safety margin subtracted from every
// lease's validity: margin = ttl/100 + lateness. It covers scheduling delays
// between the moment a deadline passes and the moment the holder reacts.
// Default 10ms; values below 1ms are raised to 1ms.
func WithLateness(d time.Duration) Option { return func(o *options) { o.lateness = d } }

// WithMasterTimeout sets how long one master may take to answer one call.
// Default 0: a tenth of the lock's ttl, at least 20ms and at most ttl/2.
func WithMasterTimeout(d time.Duration) Option { return func(o *options) { o.masterTimeout = d } }

// WithRestartQuarantine sets how long a master that lost writes stays out of
// every lock. A restart is found when the client's first new connection
// meets a server whose marker key names another process (it came back from
// a snapshot older than its last writes: lost at its start) or is missing
// (restarted empty, or flushed while running: lost at the latest when the
// client finds it). Such a master is repaired (marked anew, with a fencing
// floor above every fence it may have forgotten) and grants nothing until d
// has passed on its own clock since that moment, by which time every lock it
// forgot has expired. A master restarted from a snapshot long ago costs
// nothing; one found without a marker waits d from then. With one master
// this is a delayed restart: up to d of unavailability after each restart.
//
// d must be > 0 and at least the longest ttl any client uses on these
// masters; locks with a longer ttl are refused with ErrInvalid. Default 1
// minute.
func WithRestartQuarantine(d time.Duration) Option { return func(o *options) { o.quarantine = d } }

// WithFreshDeployment makes masters that carry no trace of an earlier life
// (no master of the set has a marker key) vote at once, as a brand-new
// deployment, instead of waiting out the restart quarantine. Redis cannot
// tell a brand-new set from one where every master restarted empty at once
// (a compose restart, a power loss), which this option then treats as new:
// a lock still held by a live client may be granted again. Meant for first
// deployments, tests and baton dev's embedded server. Default off.
func WithFreshDeployment() Option { return func(o *options) { o.fresh = true } }

// WithRefuseEviction makes the client refuse masters whose maxmemory-policy can
// evict keys (anything but noeviction): their answers count as failures
// wrapping ErrEviction. By default such masters are used and a warning is
// logged once per master.
func WithRefuseEviction() Option { return func(o *options) { o.refuseEvict = true } }

// WithLogger sets where the client's rare operational messages go: at
// level Warn a master that may evict keys, a master repaired after a
// restart; at level Info the one-time
// reports (each master's version and persistence settings at first contact,
// a brand-new deployment marked). Default nil: nowhere.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// log is the client's logger (one that discards when none was given).
func (o *options) log() *slog.Logger {
	if o.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.logger
}

// quorumLogger adapts the slog logger to the quorum machinery's Printf
// logger (nil when none was given).
func (o *options) quorumLogger() quorumLog {
	if o.logger == nil {
		return nil
	}
	return printfLog{o.logger}
}

// quorumLog is internal/quorum's logger: Printf warns, Infof informs.
type quorumLog interface {
	Printf(format string, v ...any)
	Infof(format string, v ...any)
}

type printfLog struct{ l *slog.Logger }

func (p printfLog) Printf(format string, v ...any) {
	p.l.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (p printfLog) Infof(format string, v ...any) {
	p.l.Info(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// LockOption configures one acquisition.
type LockOption func(*lockOptions)

type lockOptions struct {
	autoExtend    *bool
	maxHold       time.Duration
	maxExtensions int
	fair          bool
}

// WithAutoExtend turns auto-extension on or off, for every way of taking a
// lease (TryLock, Lock, Hold, and the other primitives' calls alike).
// Default on: the lease is extended every ttl/3 until it is released, lost
// or its Client closed. Off, it ends at its validity deadline, a little
// before the key expires in Redis.
func WithAutoExtend(on bool) LockOption { return func(o *lockOptions) { o.autoExtend = &on } }

// WithMaxHold caps how long auto-extension keeps the lease alive (for hung
// work): after d no more extensions are sent and the lease ends with
// ErrHoldLimit when its validity runs out. Default 0: no cap.
func WithMaxHold(d time.Duration) LockOption { return func(o *lockOptions) { o.maxHold = d } }

// WithMaxExtensions caps the number of automatic extensions; then the lease
// ends with ErrHoldLimit when its validity runs out. Default 0: no cap.
func WithMaxExtensions(n int) LockOption { return func(o *lockOptions) { o.maxExtensions = n } }

// WithFair makes a waiting Lock queue in FIFO order: a release hands the key
// straight to the oldest live waiter instead of letting everyone race for it.
// Single master only (a quorum of masters cannot agree on one queue). Default off.
func WithFair() LockOption { return func(o *lockOptions) { o.fair = true } }

func (o *lockOptions) auto() bool { return o.autoExtend == nil || *o.autoExtend }

func (c *Client) margin(ttl time.Duration) time.Duration {
	return ttl/100 + c.opts.lateness
}

func (c *Client) masterTimeout(ttl time.Duration) time.Duration {
	if c.opts.masterTimeout > 0 {
		return c.opts.masterTimeout
	}
	d := ttl / 10
	if d < 20*time.Millisecond {
		d = 20 * time.Millisecond
	}
	if d > ttl/2 {
		d = ttl / 2
	}
	return d
}
