// Package lograte keeps a repeated log line from flooding the log: per
// key, one line per interval, the next one saying how many were held back
// meanwhile.
package lograte

import (
	"sync"
	"time"
)

// Limiter allows one line per key per Every.
type Limiter struct {
	Every time.Duration

	mu   sync.Mutex
	keys map[string]*state
}

type state struct {
	last time.Time
	held int
}

// Allow reports whether a line for key may be written now, and how many
// lines for it were held back since the last one written.
func (l *Limiter) Allow(key string) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*state{}
	}
	s := l.keys[key]
	if s == nil {
		if len(l.keys) > 1024 { // (keys are few; a flood of distinct ones starts afresh)
			clear(l.keys)
		}
		s = &state{}
		l.keys[key] = s
	}
	now := time.Now()
	if !s.last.IsZero() && now.Sub(s.last) < l.Every {
		s.held++
		return false, 0
	}
	held, s.held, s.last = s.held, 0, now
	return true, held
}
