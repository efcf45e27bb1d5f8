// Package failpoint makes named points of the code panic on demand, so
// that a test of the real binary can prove a panic at any stage of a
// statement leaks nothing (intents, pins, counters, the session itself).
//
// TABLEPROXY_FAILPOINTS=name[,name...] arms the points named; an armed
// point panics when it is reached for a statement whose text contains its
// Marker (a comment naming it), and only then: the test's own setup and
// other sessions run as usual. Unset, as in production, a point costs one
// atomic load.
package failpoint

import (
	"os"
	"strings"
	"sync/atomic"
)

// Marker is what a statement's text must contain for the armed point
// name to panic on it.
func Marker(name string) string { return "/*failpoint " + name + "*/" }

var armed atomic.Pointer[map[string]bool]

func init() { Arm(os.Getenv("TABLEPROXY_FAILPOINTS")) }

// Arm arms the comma-separated points in names (none: disarms all).
func Arm(names string) {
	if names == "" {
		armed.Store(nil)
		return
	}
	m := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			m[n] = true
		}
	}
	armed.Store(&m)
}

// Panic panics if the point name is armed and sql carries its Marker.
func Panic(name, sql string) {
	if m := armed.Load(); m != nil && (*m)[name] && strings.Contains(sql, Marker(name)) {
		panic("failpoint " + name)
	}
}

// Armed reports whether the point name is armed: a point inside a
// hot loop or a wrapper is set up only then.
func Armed(name string) bool {
	m := armed.Load()
	return m != nil && (*m)[name]
}
