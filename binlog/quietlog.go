package binlog

import (
	"context"
	"log/slog"
)

// quietLogger is go-mysql's replication logger: every record it writes
// goes to the debug level, with "go-mysql: " before its message. It logs
// every (re)connection at info level, and a broken stream twice, at error
// and warning level ("io.ReadFull(header) failed", "retry sync is
// disabled"), when the follower itself reports the break, and resumes,
// at warning level with what it means for the subscribers.
func quietLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoted{h: l.Handler()})
}

// demoted hands every record to h at the debug level.
type demoted struct{ h slog.Handler }

func (d demoted) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, slog.LevelDebug, "go-mysql: "+r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d demoted) WithAttrs(a []slog.Attr) slog.Handler { return demoted{h: d.h.WithAttrs(a)} }
func (d demoted) WithGroup(n string) slog.Handler      { return demoted{h: d.h.WithGroup(n)} }
