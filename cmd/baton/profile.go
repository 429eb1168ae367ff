//go:build batonprofile

// A binary built with the batonprofile tag (the soak's, never a release)
// serves the Go runtime's profiles (net/http/pprof) on the loopback address
// in BATON_PROFILE_ADDR, and /debug/freeosmemory, which collects and returns
// the heap's free pages to the OS (runtime/debug.FreeOSMemory), so that a
// reading of RSS right after it shows what the process holds rather than
// the garbage of the moment.
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers on http.DefaultServeMux, which nothing else of baton serves
	"os"
	"runtime"
	"runtime/debug"
)

func init() {
	addr := os.Getenv("BATON_PROFILE_ADDR")
	if addr == "" {
		return
	}
	http.HandleFunc("/debug/freeosmemory", func(w http.ResponseWriter, _ *http.Request) {
		debug.FreeOSMemory()
		w.WriteHeader(http.StatusNoContent)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton: BATON_PROFILE_ADDR: %v\n", err)
		os.Exit(2)
	}
	runtime.MemProfileRate = 64 << 10 // finer than the default 512 KiB: the soak compares megabytes
	go func() { _ = http.Serve(ln, nil) }()
}
