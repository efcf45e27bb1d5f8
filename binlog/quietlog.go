package binlog

import (
	"context"
	"log/slog"
)

// quietLogger passes on only warnings and errors: go-mysql's replication
// logs every (re)connection at info level.
func quietLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{h: l.Handler(), min: slog.LevelWarn})
}

type levelFloor struct {
	h   slog.Handler
	min slog.Level
}

func (f levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.h.Enabled(ctx, l)
}
func (f levelFloor) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }
func (f levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h: f.h.WithAttrs(a), min: f.min}
}
func (f levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h: f.h.WithGroup(n), min: f.min}
}
