package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// logCounter is a slog.Handler that counts the scheduler's log records by
// level and message and keeps the first error text of each, so the report can
// say why claims or dispatches failed.
type logCounter struct {
	mu    *sync.Mutex
	n     map[string]int
	first map[string]string
	attrs []slog.Attr
}

func newLogCounter() *logCounter {
	return &logCounter{mu: &sync.Mutex{}, n: map[string]int{}, first: map[string]string{}}
}

func (l *logCounter) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	k := r.Level.String() + " " + r.Message
	var errText string
	find := func(a slog.Attr) bool {
		if a.Key == "err" {
			errText = a.Value.String()
			return false
		}
		return true
	}
	for _, a := range l.attrs {
		find(a)
	}
	r.Attrs(find)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[k]++
	if _, ok := l.first[k]; !ok {
		l.first[k] = errText
	}
	return nil
}

func (l *logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	c := *l
	c.attrs = append(slices.Clone(l.attrs), as...)
	return &c
}

func (l *logCounter) WithGroup(string) slog.Handler { return l }

// summary lists "count × message (first err)", most frequent first.
func (l *logCounter) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.n))
	for k := range l.n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return l.n[b] - l.n[a] })
	var out []string
	for _, k := range keys {
		s := fmt.Sprintf("%d × %s", l.n[k], k)
		if e := l.first[k]; e != "" {
			if len(e) > 200 {
				e = e[:200] + "…"
			}
			s += " (first: " + strings.ReplaceAll(e, "\n", " ") + ")"
		}
		out = append(out, s)
	}
	return out
}
