package handoff

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/scheduler"
)

const (
	keyA = "key-A-0123456789abcdef0123456789abcdef"
	keyB = "key-B-0123456789abcdef0123456789abcdef"
)

// The signature member is found only at the very end of the object, and
// anything but the exact bytes signed fails.
func TestSignatureFraming(t *testing.T) {
	g := NewSigner(config.SecurityConfig{SigningKeys: []string{keyA}})
	for _, body := range []string{`{}`, `{"a":1}`, `{"note":"\"sig\":\"x\"}"}`} {
		msg := g.Sign(DomainTask, []byte(body))
		got, err := g.Verify(DomainTask, msg)
		if err != nil || string(got) != body {
			t.Errorf("%s: verify(%s) = %s, %v", body, msg, got, err)
		}
		if _, err := g.Verify(DomainCancel, msg); err != ErrBadSignature {
			t.Errorf("%s: verified as another kind of message: %v", body, err)
		}
		for _, bad := range []string{
			strings.Replace(string(msg), "{", "{ ", 1),                                           // a byte changed
			string(msg[:len(msg)-1]) + ` }`,                                                      // trailing space
			strings.Replace(string(msg), `,"sig"`, `,"sig" `, 1),                                 // not the framing sign writes
			string(msg[:len(msg)-3]) + `A"}`,                                                     // a signature byte changed
			`{"x":1,` + string(msg[1:]),                                                          // a member added in front
			strings.TrimSuffix(string(msg), `"}`) + `","sig":"` + strings.Repeat("A", 43) + `"}`, // a second sig
		} {
			if bad == string(msg) {
				continue // the change does not apply to this body
			}
			if _, err := g.Verify(DomainTask, []byte(bad)); err == nil {
				t.Errorf("%s: accepted %s", body, bad)
			}
		}
	}
	unsigned := []byte(`{"a":1}`)
	if _, err := g.Verify(DomainTask, unsigned); err != ErrUnsigned {
		t.Errorf("unsigned: %v", err)
	}
	lax := NewSigner(config.SecurityConfig{SigningKeys: []string{keyA}, AcceptUnsigned: true})
	if _, err := lax.Verify(DomainTask, unsigned); err != nil {
		t.Errorf("accept_unsigned: %v", err)
	}
	// a well-formed signature must be right even where unsigned is accepted
	forged := `{"a":1,"sig":"` + strings.Repeat("A", 43) + `"}`
	if _, err := lax.Verify(DomainTask, []byte(forged)); err != ErrBadSignature {
		t.Errorf("accept_unsigned with a forged sig: %v", err)
	}
}

// unsignedPayload is a tick's payload as a dispatcher in namespace baton writes
// it, unsigned.
func unsignedPayload(t scheduler.Tick) []byte {
	p := PayloadOf(t)
	p.Namespace, p.Queue = "baton", "baton:default"
	b, _ := json.Marshal(p)
	return b
}
