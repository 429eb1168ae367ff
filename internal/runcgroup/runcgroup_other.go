//go:build !linux

package runcgroup

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Root is a cgroup v2 directory; there are none outside Linux.
type Root struct{}

// Open returns an error wrapping ErrUnavailable: cgroups are Linux's.
func Open(string) (*Root, error) {
	return nil, fmt.Errorf("%w: %w on %s", ErrUnavailable, errors.ErrUnsupported, runtime.GOOS)
}

// Dir returns "".
func (*Root) Dir() string { return "" }

// New fails: there is no Root outside Linux.
func (*Root) New(string) (string, error) { return "", errors.ErrUnsupported }

// RemoveLeftovers removes nothing.
func (*Root) RemoveLeftovers() ([]Leftover, error) { return nil, nil }

// Kill kills nothing.
func Kill(string, func(pid, pidfd int)) (int, error) { return 0, errors.ErrUnsupported }

// Remove removes nothing.
func Remove(string, time.Duration) error { return nil }
