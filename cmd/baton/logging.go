package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/redact"
)

// Log formats accepted by --log-format. Empty means console when stderr is a
// terminal, JSON otherwise.
const (
	logFormatJSON    = "json"
	logFormatConsole = "console"
)

// parseLogFormat checks a --log-format value.
func parseLogFormat(s string) (string, error) {
	switch s {
	case "", logFormatJSON, logFormatConsole:
		return s, nil
	}
	return "", fmt.Errorf("unknown log format %q (want json or console)", s)
}

// parseLogLevel reads a --log-level value: trace, debug, info, warn, error.
func parseLogLevel(s string) (zerolog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return zerolog.InfoLevel, nil
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("unknown log level %q (want trace, debug, info, warn or error)", s)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newZerolog returns the process logger writing to w: JSON, or the console
// format when format says so or (format empty) w is a terminal.
func newZerolog(w io.Writer, format string, level zerolog.Level) zerolog.Logger {
	if format == logFormatConsole || (format == "" && isTerminal(w)) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !isTerminal(w)}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// newSlog returns a *slog.Logger (what baton's packages take) that writes
// through zl, with the values in secrets (the config's ${VAR} values)
// masked in every message and attribute, whoever logged them (baton, asynq,
// an error from exec or net/http), before anything is escaped.
func newSlog(zl zerolog.Logger, secrets []string) *slog.Logger {
	return slog.New(&zerologHandler{zl: zl, mask: redact.Of(secrets...)})
}

// zerologHandler is a slog.Handler that forwards records to zerolog. Groups
// become nested objects; attributes keep their order. A top-level key that is
// already present (from With or an earlier attribute) is written once, the
// first value winning, so JSON consumers never see duplicate keys (the
// packages add "replica" themselves, and baton dev adds it to every line).
type zerologHandler struct {
	zl     zerolog.Logger
	mask   *redact.Secrets // nil: none
	head   []slog.Attr     // top-level attributes from WithAttrs
	groups []frame         // open groups, outermost first
}

// frame is an open group and the attributes added inside it.
type frame struct {
	name  string
	attrs []slog.Attr
}

// Enabled reports whether zerolog would write a record of level l.
func (h *zerologHandler) Enabled(_ context.Context, l slog.Level) bool {
	zl := zerologLevel(l)
	return zl >= h.zl.GetLevel() && zl >= zerolog.GlobalLevel()
}

// Handle writes r as one zerolog event.
func (h *zerologHandler) Handle(_ context.Context, r slog.Record) error {
	ev := h.zl.WithLevel(zerologLevel(r.Level))
	if ev == nil {
		return nil
	}
	rec := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { rec = append(rec, a); return true })
	// nest the record's attributes in the open groups, innermost first
	for i := len(h.groups) - 1; i >= 0; i-- {
		g := h.groups[i]
		inner := append(slices.Clip(g.attrs), rec...)
		rec = []slog.Attr{{Key: g.name, Value: slog.GroupValue(inner...)}}
	}
	seen := make(map[string]bool, len(h.head)+len(rec))
	for _, a := range append(slices.Clip(h.head), rec...) {
		if a.Key != "" && seen[a.Key] {
			continue
		}
		if h.appendAttr(ev, a) {
			seen[a.Key] = true
		}
	}
	ev.Msg(escapeLines(h.mask.Text(r.Message)))
	return nil
}

// escapeLines escapes control characters in a message as redact.Escape
// does, except the newlines baton's own multi-line messages use.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = redact.Escape(l)
	}
	return strings.Join(lines, "\n")
}

// WithAttrs returns a handler that adds as to every record, inside the open
// groups.
func (h *zerologHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	h2 := *h
	if len(h.groups) == 0 {
		h2.head = append(slices.Clip(h.head), as...)
		return &h2
	}
	h2.groups = slices.Clone(h.groups)
	last := &h2.groups[len(h2.groups)-1]
	last.attrs = append(slices.Clip(last.attrs), as...)
	return &h2
}

// WithGroup returns a handler that nests later attributes in a group.
func (h *zerologHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.groups = append(slices.Clip(h.groups), frame{name: name})
	return &h2
}

// zerologLevel maps slog levels onto zerolog's.
func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l < slog.LevelDebug:
		return zerolog.TraceLevel
	case l < slog.LevelInfo:
		return zerolog.DebugLevel
	case l < slog.LevelWarn:
		return zerolog.InfoLevel
	case l < slog.LevelError:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}

// appendAttr adds a to ev and reports whether it wrote anything (empty
// attributes and empty groups are left out, as slog's handlers do). Strings
// are masked, then escaped.
func (h *zerologHandler) appendAttr(ev *zerolog.Event, a slog.Attr) bool {
	str := func(s string) string { return redact.Escape(h.mask.Text(s)) }
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return false
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindGroup:
		as := v.Group()
		if len(as) == 0 {
			return false
		}
		if a.Key == "" { // inline, as slog does
			wrote := false
			for _, g := range as {
				wrote = h.appendAttr(ev, g) || wrote
			}
			return wrote
		}
		d := zerolog.Dict()
		wrote := false
		for _, g := range as {
			wrote = h.appendAttr(d, g) || wrote
		}
		if !wrote {
			return false
		}
		ev.Dict(a.Key, d)
	case slog.KindString:
		ev.Str(a.Key, str(v.String())) // values read from Redis may hold terminal escapes
	case slog.KindInt64:
		ev.Int64(a.Key, v.Int64())
	case slog.KindUint64:
		ev.Uint64(a.Key, v.Uint64())
	case slog.KindFloat64:
		ev.Float64(a.Key, v.Float64())
	case slog.KindBool:
		ev.Bool(a.Key, v.Bool())
	case slog.KindDuration:
		ev.Str(a.Key, v.Duration().String())
	case slog.KindTime:
		ev.Str(a.Key, v.Time().Format(time.RFC3339Nano))
	default:
		switch x := v.Any().(type) {
		case error:
			ev.Str(a.Key, str(x.Error()))
		case fmt.Stringer:
			ev.Str(a.Key, str(x.String()))
		case []string:
			out := make([]string, len(x))
			for i, s := range x {
				out[i] = str(s)
			}
			ev.Strs(a.Key, out)
		default:
			ev.Interface(a.Key, x)
		}
	}
	return true
}
