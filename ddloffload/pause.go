package ddloffload

import (
	"context"
	"sync"
)

// gate pauses a job at its next check: before each chunk it copies, each
// catch-up pass, and each stage up to the cut-over. The binary-log stream
// keeps collecting dirty keys meanwhile. The swap itself (statements held,
// table locked) is never paused, and ADMIN PAUSE is refused once the
// cut-over stage has begun.
type gate struct {
	mu     sync.Mutex // guards paused and open
	paused bool
	open   chan struct{} // closed on resume
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		g.paused, g.open = true, make(chan struct{})
	}
}

func (g *gate) resume() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		return false
	}
	g.paused = false
	close(g.open)
	return true
}

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// wait returns once the gate is open, or ctx ends.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	paused, open := g.paused, g.open
	g.mu.Unlock()
	if !paused {
		return nil
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
