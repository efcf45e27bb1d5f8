package cluster

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is the logger Raft and its stores write to: their lines go
// through the process's logger, in its format (text or JSON) and under
// its level, named "raft: ...". Raft's warnings and errors keep their
// level; its informational lines (elections, pipelines, snapshots) are at
// DEBUG, the proxy's own lines saying what matters (a leader, a member).
func raftLogger(log *slog.Logger) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: io.Discard})
	il.RegisterSink(slogSink{log})
	return il
}

type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	l := slog.LevelDebug
	switch {
	case level >= hclog.Error:
		l = slog.LevelError
	case level == hclog.Warn:
		l = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, l) {
		return
	}
	s.log.Log(ctx, l, name+": "+msg, args...)
}
