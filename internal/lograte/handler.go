package lograte

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Handler wraps a slog.Handler so that the log stays readable when
// something goes wrong for many at once (a backend outage under hundreds
// of sessions): a WARN line whose message was written less than Every ago
// is held back, and the next one written says how many were
// (repeated=N). Lines below ERROR carry no stack trace: a value that
// spans several lines keeps its first.
type Handler struct {
	next    slog.Handler
	limiter *Limiter
}

// NewHandler returns next, rate-limited.
func NewHandler(next slog.Handler, every time.Duration) *Handler {
	return &Handler{next: next, limiter: &Limiter{Every: every}}
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		return h.next.Handle(ctx, r)
	}
	if r.Level == slog.LevelWarn {
		ok, held := h.limiter.Allow(r.Message)
		if !ok {
			return nil
		}
		if held > 0 {
			r.AddAttrs(slog.Int("repeated", held))
		}
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(firstLine(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// firstLine is a with a value of several lines cut to its first.
func firstLine(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	var s string
	switch v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			return a
		}
	default:
		return a
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return slog.String(a.Key, fmt.Sprintf("%s [%d more lines]", s[:i], strings.Count(s[i:], "\n")))
	}
	return a
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), limiter: h.limiter}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), limiter: h.limiter}
}
