package ddloffload

import (
	"context"
	"math"
	"sync"
	"time"
)

// The ETA is the rows left at the copy's recent pace, not at its average
// since it began: a copy speeds up and slows down (the throttle holds it,
// the buffer pool warms, the foreground comes and goes), and its average
// over a whole 10M-row copy put the ETA up to 33% off near the end
// (bench/addindex.sh --big).

// paceTau is the time constant of the recent pace: a change of pace shows
// in the ETA within a few of them.
const paceTau = 10 * time.Second

// pace is a copy's recent rows a second: an exponentially weighted mean of
// the rates between its samples.
type pace struct {
	mu   sync.Mutex
	at   time.Time
	rows int64
	rate float64 // 0 until two samples
}

// sample records the rows done at now.
func (p *pace) sample(now time.Time, rows int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dt := now.Sub(p.at).Seconds()
	switch {
	case p.at.IsZero() || rows < p.rows:
		p.rate = 0 // the first sample, or a new run of the copy
	case dt <= 0:
		return
	case p.rate == 0:
		p.rate = float64(rows-p.rows) / dt
	default:
		w := 1 - math.Exp(-dt/paceTau.Seconds())
		p.rate += w * (float64(rows-p.rows)/dt - p.rate)
	}
	p.at, p.rows = now, rows
}

// recent is the recent pace, 0 when not known yet.
func (p *pace) recent() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// followPace samples the copy's rows every second until ctx ends.
func (r *runner) followPace(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		r.rec.pace.sample(time.Now(), r.rec.rowsDone.Load())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
