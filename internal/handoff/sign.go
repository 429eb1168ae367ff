package handoff

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"

	"github.com/batonhq/baton/config"
)

// What replicas hand each other through Redis (task payloads, replace
// requests) is signed with HMAC-SHA256 under Config.Security.SigningKeys,
// so that a writer to Redis who lacks the key can neither enqueue a run
// nor stop one. A signed message is the JSON object it was, with one more
// member at its end: {...,"sig":"<base64url>"}. The signature covers the
// object's bytes as sent, without that member, after a domain string that
// says what the message is (and, for a replace request, on which channel),
// so a signature cannot be moved from one kind of message or job to
// another. Workers that do not know "sig" ignore it: the format is
// readable by every version.

// Signature errors.
var (
	// ErrUnsigned: the message carries no signature, and the worker has
	// keys (and does not accept unsigned messages).
	ErrUnsigned = errors.New("handoff: unsigned (security.signing_keys is set: only signed tasks and replace requests are accepted)")
	// ErrBadSignature: the signature is not one of the worker's keys: a
	// message forged or changed in Redis, or signed by another deployment.
	ErrBadSignature = errors.New("handoff: bad signature (forged or changed in Redis, or signed with a key this replica does not have)")
)

// Signature domains.
const (
	DomainTask   = "baton task v1"
	DomainCancel = "baton replace request v1"
)

// Signer signs with the first key and verifies with every one.
type Signer struct {
	keys           [][]byte
	acceptUnsigned bool
}

func NewSigner(s config.SecurityConfig) *Signer {
	g := &Signer{acceptUnsigned: s.AcceptUnsigned}
	for _, k := range s.SigningKeys {
		if k != "" {
			g.keys = append(g.keys, []byte(k))
		}
	}
	return g
}

// Enabled reports whether the Signer has keys.
func (g *Signer) Enabled() bool { return g != nil && len(g.keys) > 0 }

func mac(key []byte, domain string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the JSON object body with its signature appended; body as it
// is without keys.
func (g *Signer) Sign(domain string, body []byte) []byte {
	if !g.Enabled() || len(body) < 2 || body[len(body)-1] != '}' {
		return body
	}
	sig := base64.RawURLEncoding.EncodeToString(mac(g.keys[0], domain, body))
	out := make([]byte, 0, len(body)+len(sig)+10)
	out = append(out, body[:len(body)-1]...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"sig":"`...)
	out = append(out, sig...)
	return append(out, `"}`...)
}

// sigMember is how the signature member starts; the signature itself is
// 43 base64url characters (a 32-byte MAC, unpadded).
const (
	sigMember = `"sig":"`
	sigLen    = 43
)

// splitSig finds the signature member at the very end of msg: it returns the
// object without it and the signature, or ok false.
func splitSig(msg []byte) (body []byte, sig string, ok bool) {
	n := len(msg)
	start := n - 2 - sigLen - len(sigMember) // where sigMember would begin
	if start < 1 || msg[n-1] != '}' || msg[n-2] != '"' || string(msg[start:start+len(sigMember)]) != sigMember {
		return nil, "", false
	}
	s := msg[start+len(sigMember) : n-2]
	for _, c := range s {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, "", false
		}
	}
	end := start // the body ends before the member and its comma
	switch {
	case msg[start-1] == ',':
		end = start - 1
	case start != 1: // only "{" may precede a member without a comma
		return nil, "", false
	}
	body = make([]byte, end+1)
	copy(body, msg[:end])
	body[end] = '}'
	return body, string(s), true
}

// Unsign returns msg without its signature member, where Sign puts one,
// and whether it had one; msg as it is when it has none. For a reader
// without keys whose decoding refuses a member it does not know.
func Unsign(msg []byte) ([]byte, bool) {
	body, _, ok := splitSig(msg)
	if !ok {
		return msg, false
	}
	return body, true
}

// Verify checks msg's signature and returns the object without it. Without
// keys every message is accepted as it is; with keys, an unsigned one only
// when acceptUnsigned.
func (g *Signer) Verify(domain string, msg []byte) ([]byte, error) {
	if !g.Enabled() {
		return msg, nil
	}
	body, s, ok := splitSig(msg)
	if !ok {
		// no signature where sign puts one: unsigned (whatever the bytes
		// "sig" may appear in, a job or replica name)
		if g.acceptUnsigned {
			return msg, nil
		}
		return nil, ErrUnsigned
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadSignature
	}
	for _, k := range g.keys {
		if hmac.Equal(sig, mac(k, domain, body)) {
			return body, nil
		}
	}
	return nil, ErrBadSignature
}
