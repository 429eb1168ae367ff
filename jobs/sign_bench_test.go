package jobs

import (
	"testing"

	"github.com/batonhq/baton/config"
)

// BenchmarkSignVerify: what signing adds to a dispatch and a run.
func BenchmarkSignVerify(b *testing.B) {
	g := newSigner(config.SecurityConfig{SigningKeys: []string{keyA, keyB}})
	body := unsignedPayload(tickOf("report", 1))
	b.ReportAllocs()
	for b.Loop() {
		msg := g.sign(domainTask, body)
		if _, err := g.verify(domainTask, msg); err != nil {
			b.Fatal(err)
		}
	}
}
