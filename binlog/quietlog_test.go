package binlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// go-mysql's records, errors included, reach the proxy's log at the debug
// level only: a broken stream is reported once, by the follower.
func TestGoMySQLLogsAtDebug(t *testing.T) {
	var buf bytes.Buffer
	at := func(level slog.Level) *slog.Logger {
		buf.Reset()
		return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
	}
	quietLogger(at(slog.LevelInfo)).Error("io.ReadFull(header) failed", "err", "EOF")
	if buf.Len() != 0 {
		t.Fatalf("logged at info level: %s", buf.String())
	}
	quietLogger(at(slog.LevelDebug)).With("stream", 1).Error("io.ReadFull(header) failed", "err", "EOF")
	got := buf.String()
	for _, want := range []string{"level=DEBUG", `msg="go-mysql: io.ReadFull(header) failed"`, "stream=1", "err=EOF"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
