package memlimit

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
)

// Past the high-water mark the caches are shed; below it they are not.
func TestShedsAboveHighWater(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	hold := make([]byte, 64<<20)
	runtime.GC()
	shed := 0
	w := &Watcher{Limit: 1 << 40, Shed: func() { shed++ }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.check()
	if shed != 0 {
		t.Fatalf("shed with %d MiB live under a 1 TiB limit", live()>>20)
	}
	w.Limit = 64 << 20
	w.check()
	if shed != 1 || w.sheds.Load() != 1 {
		t.Fatalf("not shed with %d MiB live over a 64 MiB limit", live()>>20)
	}
	runtime.KeepAlive(hold)
}

// Past the mark after a shed, the watcher is over (new clients are
// refused); back under it, it is not.
func TestOverWhenSheddingDoesNotHelp(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	hold := make([]byte, 64<<20)
	runtime.GC()
	w := &Watcher{Limit: 64 << 20, Shed: func() {}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.check()
	if w.Over() {
		t.Fatal("over before the caches were shed once")
	}
	w.check()
	if !w.Over() {
		t.Fatalf("not over with %d MiB live after a shed, limit 64 MiB", live()>>20)
	}
	runtime.KeepAlive(hold)
	hold = nil
	runtime.GC()
	w.check()
	if w.Over() {
		t.Fatalf("still over with %d MiB live", live()>>20)
	}
}
