//go:build !dev

package main

import "errors"

// hasEmbedded tells whether this binary carries baton dev's embedded Redis.
const hasEmbedded = false

// errNoEmbedded: the production binary carries no test server.
var errNoEmbedded = errors.New("this baton binary was built without the embedded Redis (a production build): " +
	"run `go run -tags dev ./cmd/baton dev` (or `make dev`), or point `baton run` at a Redis")

// startEmbedded fails: see errNoEmbedded.
func startEmbedded() (url string, stop func(), err error) {
	return "", nil, errNoEmbedded
}
