package redact

import (
	"net/url"
	"strings"
	"testing"
)

// A password given as a query option (some clients read
// "?password=", go-redis refuses it as an unknown option) is masked too.
func TestURLMasksAPasswordOption(t *testing.T) {
	for in, want := range map[string]string{
		"redis://host:6379/0?password=s3cret":                 "redis://host:6379/0?password=xxxxx",
		"redis://host:6379/0?dial_timeout=2s&Password=s3cret": "redis://host:6379/0?dial_timeout=2s&Password=xxxxx",
		"redis://host/0?pass=s3cret&db=1":                     "redis://host/0?pass=xxxxx&db=1",
		"redis://host/0?requirepass=s3cret":                   "redis://host/0?requirepass=xxxxx",
		"redis://host/0?auth=s3cret":                          "redis://host/0?auth=xxxxx",
		"redis://host/0?dial_timeout=2s":                      "redis://host/0?dial_timeout=2s",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":         "redis://127.0.0.1:6379/0",
		"redis://:secret@127.0.0.1:6379/0": "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://user:secret@host:6380/2": "rediss://user:xxxxx@host:6380/2",
		"redis://:secret@h:badport/0":      "redis://:xxxxx@h:badport/0",
		"redis://u:p@ss@h:1%zz/0":          "redis://u:xxxxx@h:1%zz/0",
		"not a url":                        "not a url",
		"https://api.example/u/me@x.com":   "https://api.example/u/me@x.com",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEndpointAndEscape(t *testing.T) {
	if got := Endpoint("https://u:p@api.example/v1/hook?key=s3cret#frag"); got != "https://api.example/v1/hook" {
		t.Errorf("Endpoint = %q", got)
	}
	if got := Escape("ok-value"); got != "ok-value" {
		t.Errorf("Escape of a clean value = %q", got)
	}
	if got := Escape("a\x1b[2Jb\n"); strings.ContainsAny(got, "\x1b\n") {
		t.Errorf("Escape = %q", got)
	}
}

func TestSecretsText(t *testing.T) {
	s := Of("tok1", "tok1-very-secret-part", `pa"ss`, "ab")
	for in, want := range map[string]string{
		"token tok1-very-secret-part": "token xxxxx",
		"short ab stays":              "short ab stays",
		`quoted "pa\"ss"`:             `quoted "xxxxx"`,
		`twice "pa\\\"ss"`:            `twice "xxxxx"`,
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := s.Value("ab"); got != Mask {
		t.Errorf("Value of a whole short secret = %q", got)
	}
	var none *Secrets
	if none.Text("x") != "x" || !none.Empty() {
		t.Error("nil Secrets")
	}
}

// A Redis URL without "//" before its host (a typo go-redis reads as
// localhost:6379) or whose password holds a "/" is shown with everything
// between its scheme and its last "@" masked.
func TestURLWithoutHostMasksThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"redis//:s3cret@host":         "redis//:xxxxx@host",
		"redis:/:s3cret@host":         "redis:/:xxxxx@host",
		"redis:s3cret@host":           "redis:xxxxx@host",
		"redis:s3cret@host:6380/0":    "redis:xxxxx@host:6380/0",
		"redis:user:s3cret@host":      "redis:user:xxxxx@host",
		"redis://:s3/cret@host:6379/": "redis://:xxxxx@host:6379/",
		"redis://:12/s3cret@host":     "redis://:xxxxx@host",
		"redis://s3cret@h:bad/0":      "redis://xxxxx@h:bad/0",
		":s3cret@host:6379":           ":xxxxx@host:6379",
		"redis://:s3cret":             "redis://:xxxxx",
		"redis://user:s3cret":         "redis://user:xxxxx",
		"redis://user:s3cret/0":       "redis://user:xxxxx/0",
	} {
		got := URL(in)
		if got != want || strings.Contains(got, "s3") {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A secret is masked where a JSON document another program wrote carries
// it: with "/" escaped as "\/" (PHP's json_encode), and with every
// non-ASCII rune escaped as \uXXXX (Python's json.dumps), a surrogate pair
// above U+FFFF, in lower or upper case hex.
func TestSecretsTextMasksOtherJSONSpellings(t *testing.T) {
	secret := "tok/en+é😀<&"
	s := Of(secret)
	for _, body := range []string{
		`{"error": "bad token tok\/en+é😀<&"}`,
		`{"error": "bad token tok/en+\u00e9\ud83d\ude00<&"}`,
		`{"error": "bad token tok\/en+\u00E9\uD83D\uDE00<&"}`,
		`{"error": "bad token tok\/en+\u00e9\ud83d\ude00\u003c\u0026"}`,
	} {
		if got := s.Text(body); got != `{"error": "bad token xxxxx"}` {
			t.Errorf("Text(%s) = %s, want the secret masked", body, got)
		}
	}
}

// A secret is masked where another program percent-encoded it: with lower
// case hex digits (a server echoing the path it got, %2f), and in a query
// with %20 for a space (JavaScript's encodeURIComponent).
func TestSecretsTextMasksOtherPercentEncodings(t *testing.T) {
	secret := "p@ss w/rd+é?&="
	s := Of(secret)
	lower := strings.NewReplacer("%2F", "%2f", "%C3", "%c3", "%A9", "%a9", "%3F", "%3f", "%3D", "%3d", "%2B", "%2b", "%40", "%40", "%26", "%26")
	for _, text := range []string{
		"404 not found: /v1/" + lower.Replace(url.PathEscape(secret)) + "/hook",
		"404 not found: /v1/hook?key=" + lower.Replace(url.QueryEscape(secret)),
		"GET /v1/hook?key=p%40ss%20w%2Frd%2B%C3%A9%3F%26%3D",
		"GET /v1/hook?key=p%40ss%20w%2frd%2b%c3%a9%3f%26%3d",
	} {
		got := s.Text(text)
		if !strings.Contains(got, Mask) || strings.Contains(got, "ss%20w") || strings.Contains(got, "ss+w") {
			t.Errorf("Text(%q) = %q: the escaped secret is not masked", text, got)
		}
	}
}

// A secret is masked where a URL carries it percent-encoded: in a path
// segment, in a path (as url.URL.String writes it) and in a query value.
func TestSecretsTextMasksURLEscapedForms(t *testing.T) {
	secret := "p@ss w/rd+é?&="
	s := Of(secret)
	u := &url.URL{Scheme: "https", Host: "api.example", Path: "/v1/" + secret + "/hook"}
	for _, text := range []string{
		"GET https://api.example/v1/" + url.PathEscape(secret) + "/hook: status 500",
		"GET " + u.String() + ": status 500",
		"GET https://api.example/v1/hook?key=" + url.QueryEscape(secret) + ": timeout",
		"GET https://api.example/v1/hook?" + url.Values{"key": {secret}}.Encode(),
	} {
		got := s.Text(text)
		if !strings.Contains(got, Mask) || strings.Contains(got, "ss%20w") || strings.Contains(got, "ss+w") {
			t.Errorf("Text(%q) = %q: the escaped secret is not masked", text, got)
		}
	}
}

// A message that quotes a piece of a secret (a port of a URL, a field of a
// schedule) has that piece masked when it is at least min bytes long; other
// quoted text stays.
func TestSecretsPartsMasksQuotedPieces(t *testing.T) {
	s := Of("redis://:pw-51d0e8@cache:notaport/0", "tok-7f3a9c2e")
	for _, c := range []struct {
		in   string
		min  int
		want string
	}{
		{`invalid port ":notaport" after host`, MinSubstring, `invalid port "xxxxx" after host`},
		{`bad token "7f3a" and "tok-7f3a9c2e"`, MinSubstring, `bad token "xxxxx" and "xxxxx"`},
		{`got "ab" not "zz"`, MinSubstring, `got "ab" not "zz"`},
		{`got "0" here`, 1, `got "xxxxx" here`},
		{`unknown mode "zz" ("unterminated`, 1, `unknown mode "zz" ("unterminated`},
		{`quoted "pw-51d0e8@cache" \"inner\"`, MinSubstring, `quoted "xxxxx" \"inner\"`},
	} {
		if got := s.Parts(c.in, c.min); got != c.want {
			t.Errorf("Parts(%q, %d) = %q, want %q", c.in, c.min, got, c.want)
		}
	}
}

// A message that prints a piece of a secret unquoted (a parser's "failed
// to parse int from xyzday") has each word of at least min bytes that is a
// word of a secret masked; part of a secret's word stays.
func TestSecretsWordsMasksUnquotedPieces(t *testing.T) {
	s := Of("0 0 * * * xyzday", "redis://:pw@cache:notaport/0")
	for in, want := range map[string]string{
		"failed to parse int from xyzday: invalid": "failed to parse int from xxxxx: invalid",
		"(xyzday/2) and [cache].":                  "(xxxxx/2) and [xxxxx].",
		"expected 5 or 6 fields, found 0":          "expected 5 or 6 fields, found 0",
		"invalid port after host notaport":         "invalid port after host xxxxx",
	} {
		if got := s.Words(in, 3); got != want {
			t.Errorf("Words(%q) = %q, want %q", in, got, want)
		}
	}
}

// Inert escapes every rune a terminal would act on (ESC sequences, BEL,
// CR, newline, tab, bidi overrides, invalid UTF-8) and keeps the rest,
// quotes and backslashes too, so that inert text holding inert or quoted
// parts comes back as it is.
func TestInertEscapesWhatATerminalActsOn(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ok", "ok"},
		{"\x1b[2K\x1b[1G ok", `\x1b[2K\x1b[1G ok`},
		{"a\x1b]0;title\a b", `a\x1b]0;title\a b`},
		{"line\r\nnext\tcell\x7f", `line\r\nnext\tcell\x7f`},
		{"evil\u202etxt.exe \u200b", `evil\u202etxt.exe \u200b`},
		{"bad \xff utf8", `bad \xff utf8`},
		{`say "hi" \ there` + "\x1b", `say "hi" \ there\x1b`},
		{"ünïcode ✓", "ünïcode ✓"},
	} {
		got := Inert(c.in)
		if got != c.want {
			t.Errorf("Inert(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := Inert(got); again != got {
			t.Errorf("Inert of its own result %q changed it to %q", got, again)
		}
	}
	if q := Quote("\x1b[31m"); Inert(q) != q {
		t.Errorf("Inert changes Quote's result %q to %q", q, Inert(q))
	}
}
