// Package redact keeps baton's secrets out of what it prints: passwords in
// URLs, values that came from ${VAR} in the config, and bytes read from Redis
// that could drive a terminal.
package redact

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Mask is what a secret is replaced with.
const Mask = "xxxxx"

// MinSubstring is the shortest secret masked where it appears inside other
// text (logs, output tails, error messages). Shorter values are masked only
// where a whole config value is printed: masking every "ab" in a log would
// hide nothing and garble everything.
const MinSubstring = 4

// Secrets is a set of secret values and, for config values that held them,
// how each value is shown masked. The zero value and nil hold none. A
// Secrets is not changed after it is built, so it is safe to share.
type Secrets struct {
	values []string          // longest first, so a secret inside another is masked whole
	forms  []string          // values and their escaped forms, longest first
	whole  map[string]string // a full config value -> the same with its secrets masked
}

// Builder collects secrets while a config is loaded.
type Builder struct {
	values map[string]bool
	whole  map[string]string
}

// Add records a secret value.
func (b *Builder) Add(v string) {
	if b == nil || v == "" {
		return
	}
	if b.values == nil {
		b.values = map[string]bool{}
	}
	b.values[v] = true
}

// AddValue records that a config value, as loaded, is shown as masked.
func (b *Builder) AddValue(value, masked string) {
	if value == masked {
		return
	}
	if b.whole == nil {
		b.whole = map[string]string{}
	}
	b.whole[value] = masked
}

// longestFirst orders secrets so that one inside another is masked whole.
func longestFirst(a, b string) int {
	if d := len(b) - len(a); d != 0 {
		return d
	}
	return strings.Compare(a, b)
}

// Values returns the secret values b collected, longest first, as
// Secrets().Values() does without working out how each is escaped.
func (b *Builder) Values() []string {
	if b == nil {
		return nil
	}
	var vs []string
	for v := range b.values {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, longestFirst)
	return vs
}

// Secrets returns what b collected; nil when nothing.
func (b *Builder) Secrets() *Secrets {
	if len(b.values) == 0 && len(b.whole) == 0 {
		return nil
	}
	s := &Secrets{whole: b.whole, values: b.Values()}
	seen := map[string]bool{}
	for _, v := range s.values {
		if len(v) < MinSubstring {
			continue // masked only as a whole value
		}
		for _, f := range escapedForms(v) {
			if len(f) >= MinSubstring && !seen[f] {
				seen[f] = true
				s.forms = append(s.forms, f)
			}
		}
	}
	slices.SortFunc(s.forms, longestFirst)
	return s
}

// escapedForms returns v as it is and as it reads inside a Go-quoted string
// (%q, once and quoted again, as nested error messages have it), inside a
// JSON string (see jsonForms), and percent-encoded in a URL: as a path
// segment (url.PathEscape), as a path (what url.URL.String writes, "/"
// kept) and as a query value (url.QueryEscape, and with %20 for a space),
// each with its hex digits in upper and in lower case.
func escapedForms(v string) []string {
	inner := func(q string) string { return q[1 : len(q)-1] }
	q1 := inner(strconv.Quote(v))
	out := []string{v, q1, inner(strconv.Quote(q1))}
	out = append(out, jsonForms(v)...)
	path := strings.TrimPrefix((&url.URL{Path: "/" + v}).EscapedPath(), "/")
	query := url.QueryEscape(v)
	for _, f := range []string{url.PathEscape(v), path, query, strings.ReplaceAll(query, "+", "%20")} {
		out = append(out, f, lowerEscapes(f))
	}
	return out
}

// lowerEscapes returns the percent-encoded s with the hex digits of its
// escapes in lower case (%2f), as some programs write them.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for k := i + 1; k <= i+2; k++ {
				if 'A' <= b[k] && b[k] <= 'F' {
					b[k] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}

// jsonForms returns v as the JSON encoders of other programs write it
// inside a string: with "<", ">" and "&" escaped or not (Go's
// json.Marshal), "/" escaped as "\/" or not (PHP), and every non-ASCII rune
// as it is or escaped as \uXXXX in lower or upper case hex (Python's
// json.dumps, PHP).
func jsonForms(v string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) != nil {
			continue
		}
		j := strings.TrimSuffix(b.String(), "\n")
		j = j[1 : len(j)-1]
		for _, slash := range []bool{false, true} {
			s := j
			if slash {
				s = strings.ReplaceAll(s, "/", `\/`)
			}
			out = append(out, s, asciiJSON(s, "%04x"), asciiJSON(s, "%04X"))
		}
	}
	return out
}

// asciiJSON returns the JSON string content s with every non-ASCII rune
// written as \uXXXX (a surrogate pair above U+FFFF), hex digits by format.
func asciiJSON(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u`+format+`\u`+format, r1, r2)
		default:
			fmt.Fprintf(&b, `\u`+format, r)
		}
	}
	return b.String()
}

// Of returns the Secrets holding values.
func Of(values ...string) *Secrets {
	var b Builder
	for _, v := range values {
		b.Add(v)
	}
	return b.Secrets()
}

// Empty reports whether s holds no secret.
func (s *Secrets) Empty() bool { return s == nil || len(s.values) == 0 }

// Values returns the secret values, longest first.
func (s *Secrets) Values() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.values)
}

// Value masks a whole config value: the parts that came from secrets become
// Mask, the rest stays ("https://host/?key=xxxxx"). Text that is no config
// value as loaded is masked as Text does.
func (s *Secrets) Value(v string) string {
	if s == nil {
		return v
	}
	if m, ok := s.whole[v]; ok {
		return m
	}
	for _, sec := range s.values {
		if v == sec {
			return Mask
		}
	}
	return s.Text(v)
}

// Text masks every secret of at least MinSubstring bytes inside free text,
// also where the text quotes it (%q, nested once, or JSON) or carries it
// percent-encoded in a URL path or query.
func (s *Secrets) Text(t string) string {
	if s == nil {
		return t
	}
	for _, f := range s.forms {
		if strings.Contains(t, f) {
			t = strings.ReplaceAll(t, f, Mask)
		}
	}
	return t
}

// Parts masks what Text masks and, besides, every double-quoted Go string
// in t (as %q writes it) whose value is part of a secret and at least min
// bytes long (min below 1 counts as 1): for messages that quote a piece of
// a value (a port, a field of a schedule) that came from a secret.
func (s *Secrets) Parts(t string, min int) string {
	if s == nil {
		return t
	}
	t = s.Text(t)
	quotedMask := strconv.Quote(Mask)
	var b strings.Builder
	for {
		i := strings.IndexByte(t, '"')
		if i < 0 {
			b.WriteString(t)
			return b.String()
		}
		b.WriteString(t[:i])
		q, err := strconv.QuotedPrefix(t[i:])
		if err != nil {
			b.WriteByte('"')
			t = t[i+1:]
			continue
		}
		t = t[i+len(q):]
		if v, _ := strconv.Unquote(q); len(v) >= max(min, 1) && v != Mask && s.holds(v) {
			q = quotedMask
		}
		b.WriteString(q)
	}
}

// Words masks what Text masks and, besides, every word of t of at least
// min bytes (min below 1 counts as 1) that is also a word of a secret, a
// word being a maximal run of letters and digits: for a message about a
// value that came from a secret, whose parser may print a piece of it
// unquoted ("failed to parse int from xyzday"). A word of the message
// that is only part of a secret's word ("port" of "notaport") stays.
func (s *Secrets) Words(t string, min int) string {
	if s == nil {
		return t
	}
	t = s.Text(t)
	words := map[string]bool{}
	for _, v := range s.values {
		for _, w := range strings.FieldsFunc(v, notWordRune) {
			words[w] = true
		}
	}
	var b strings.Builder
	for len(t) > 0 {
		i := strings.IndexFunc(t, isWordRune)
		if i < 0 {
			i = len(t)
		}
		b.WriteString(t[:i])
		t = t[i:]
		j := strings.IndexFunc(t, notWordRune)
		if j < 0 {
			j = len(t)
		}
		if w := t[:j]; len(w) >= max(min, 1) && words[w] && w != Mask {
			b.WriteString(Mask)
		} else {
			b.WriteString(w)
		}
		t = t[j:]
	}
	return b.String()
}

func isWordRune(r rune) bool  { return unicode.IsLetter(r) || unicode.IsDigit(r) }
func notWordRune(r rune) bool { return !isWordRune(r) }

// holds reports whether part is part of one of the secrets.
func (s *Secrets) holds(part string) bool {
	for _, v := range s.values {
		if strings.Contains(v, part) {
			return true
		}
	}
	return false
}

// Merge returns the union of s and o.
func (s *Secrets) Merge(o *Secrets) *Secrets {
	if s == nil {
		return o
	}
	if o == nil {
		return s
	}
	var b Builder
	for _, v := range s.values {
		b.Add(v)
	}
	for _, v := range o.values {
		b.Add(v)
	}
	for k, v := range s.whole {
		b.AddValue(k, v)
	}
	for k, v := range o.whole {
		b.AddValue(k, v)
	}
	return b.Secrets()
}

// URL returns u with the password of its user info, and the value of a
// password query option (?password=, see passwordOptions), replaced by
// Mask. A string that does not parse as a URL with a host, or that has no
// "//" before its host ("redis:pw@host", "redis//:pw@host", "redis:/:pw@host",
// typos go-redis would read as localhost), loses what stands between its
// scheme and its last "@" but a user name written before a ":".
func URL(u string) string {
	u = maskPasswordOptions(u)
	p, err := url.Parse(u)
	if err == nil && (p.Hostname() != "" || !strings.Contains(u, "@")) {
		if p.User == nil {
			return u
		}
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), Mask)
		}
		return p.String()
	}
	at := strings.LastIndex(u, "@")
	if at < 0 {
		return maskPortlessPassword(u)
	}
	// the prefix is the scheme as written, with or without "//" or a
	// colon (":pw@host:6379" is a typo away from a URL too)
	start := 0
	if scheme, _, ok := strings.Cut(u, "://"); ok && len(scheme)+3 <= at {
		start = len(scheme) + 3
	} else {
		for start < at && isSchemeByte(u[start], start == 0) {
			start++
		}
		for start < at && (u[start] == ':' || u[start] == '/') {
			start++
		}
	}
	info := u[start:at]
	if user, _, ok := strings.Cut(info, ":"); ok {
		return u[:start] + user + ":" + Mask + u[at:]
	}
	return u[:start] + Mask + u[at:]
}

// passwordOptions are the query options whose value is a password in some
// client's Redis URLs (go-redis reads none of them: it refuses the URL, and
// the message shows it).
var passwordOptions = []string{"password", "pass", "pwd", "requirepass", "auth"}

// maskPasswordOptions masks the value of every query option of u named in
// passwordOptions (in any case).
func maskPasswordOptions(u string) string {
	base, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	opts := strings.Split(query, "&")
	for i, o := range opts {
		if k, _, ok := strings.Cut(o, "="); ok && slices.Contains(passwordOptions, strings.ToLower(k)) {
			opts[i] = k + "=" + Mask
		}
	}
	out := base + "?" + strings.Join(opts, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// maskPortlessPassword masks, in a URL u without "@" that did not parse,
// what follows the first ":" of its host part unless it is a port number:
// "redis://:pw" and "redis://user:pw/0" (a URL whose "@host" was left
// out) read the password as a port.
func maskPortlessPassword(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok || strings.HasPrefix(rest, "[") {
		return u
	}
	start := len(u) - len(rest)
	end := len(u)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = start + i
	}
	colon := strings.IndexByte(u[start:end], ':')
	if colon < 0 {
		return u
	}
	port := u[start+colon+1 : end]
	if strings.Trim(port, "0123456789") == "" {
		return u
	}
	return u[:start+colon+1] + Mask + u[end:]
}

// isSchemeByte reports whether c may stand in a URL scheme (RFC 3986:
// a letter first, then letters, digits, "+", "-" and ".").
func isSchemeByte(c byte, first bool) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return true
	case first:
		return false
	}
	return '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// Endpoint returns an HTTP URL as scheme://host/path, for logs: no user
// info, no query, no fragment (tokens travel in queries). A string that
// does not parse gives "(unparsable URL)".
func Endpoint(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path, RawPath: p.RawPath}).String()
}

// Quote returns s in double quotes with control characters, invalid UTF-8
// and non-printing runes escaped: for values read from Redis, which anyone
// who can write to it chose.
func Quote(s string) string { return strconv.Quote(s) }

// Escape returns s with control characters, invalid UTF-8 and non-printing
// runes escaped as Quote does, without the quotes; a clean s comes back
// as it is.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Inert returns s as it can be printed to a terminal: every rune that is
// not printable (control characters such as ESC, BEL, CR, newline and tab;
// bidi and other format characters; invalid UTF-8) is written as its Go
// escape (\x1b, \a, \r, \n, \t, \u202e, \xff), everything else as it is,
// quotes and backslashes too. So printed it moves no cursor, clears no
// line, sets no title and starts no row, and Inert of its own result (or of
// Quote's) changes nothing: text that holds an inert part stays readable
// when the whole is made inert again. A clean s comes back as it is.
func Inert(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// CutLimit is how much of a value read from Redis an error quotes.
const CutLimit = 64

// Cut is s, a value read from Redis, cut to its first CutLimit bytes for
// an error that quotes it (jobs.CorruptError).
func Cut(s string) string {
	if len(s) > CutLimit {
		return s[:CutLimit]
	}
	return s
}
