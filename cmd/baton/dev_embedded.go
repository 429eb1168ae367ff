//go:build dev

package main

import "github.com/batonhq/baton/internal/devredis"

// hasEmbedded tells whether this binary carries baton dev's embedded Redis.
const hasEmbedded = true

// startEmbedded starts baton dev's embedded Redis-compatible server.
func startEmbedded() (url string, stop func(), err error) {
	s, err := devredis.Start()
	if err != nil {
		return "", nil, err
	}
	return s.URL(), s.Close, nil
}
