package handoff

import (
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/worktest"
)

// BenchmarkSignVerify: what signing adds to a dispatch and a run.
func BenchmarkSignVerify(b *testing.B) {
	g := NewSigner(config.SecurityConfig{SigningKeys: []string{keyA, keyB}})
	body := unsignedPayload(worktest.TickOf("report", 1))
	b.ReportAllocs()
	for b.Loop() {
		msg := g.Sign(DomainTask, body)
		if _, err := g.Verify(DomainTask, msg); err != nil {
			b.Fatal(err)
		}
	}
}
