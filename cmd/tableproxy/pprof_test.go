package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// Profiles are served on their own listener, never the command line
// (which may hold passwords).
func TestPprofServesNoCommandLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err := servePprof(addr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for path, want := range map[string]int{"/debug/pprof/": 200, "/debug/pprof/heap": 200, "/debug/pprof/cmdline": 404, "/metrics": 404} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
