package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":         "redis://127.0.0.1:6379/0",
		"redis://:secret@127.0.0.1:6379/0": "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://user:secret@host:6380/2": "rediss://user:xxxxx@host:6380/2",
		"redis://:secret@h:badport/0":      "redis://:xxxxx@h:badport/0",
		"redis://u:p@ss@h:1%zz/0":          "redis://u:xxxxx@h:1%zz/0",
		"not a url":                        "not a url",
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
