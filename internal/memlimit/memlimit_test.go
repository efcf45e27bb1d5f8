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
