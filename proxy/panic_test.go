package proxy

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// panicker panics at one stage of a statement that mentions "panic-here"
// (a plugin bug, or a decoder's): when the chain calls it, when the
// answer it gave is written, or when the outcome is observed.
type panicker struct{ stage string }

func (p *panicker) Name() string { return "panicker" }

func (p *panicker) OnStatement(st *plugins.Statement) plugins.Action {
	if !strings.Contains(st.SQL, "panic-here") {
		return plugins.Continue
	}
	switch p.stage {
	case "statement":
		panic("injected: statement")
	case "answer":
		return plugins.AnswerWith(plugins.ResponderFunc(func(plugins.ResponseWriter) error { panic("injected: answer") }))
	}
	return plugins.Continue
}

func (p *panicker) OnResult(st *plugins.Statement, _ *plugins.Outcome) {
	if p.stage == "result" && strings.Contains(st.SQL, "panic-here") {
		panic("injected: result")
	}
}

// holder stands for a plugin that holds something for a session (a write
// intent, a pin) from its statement until the session ends.
type holder struct {
	mu   sync.Mutex
	held map[uint32]bool
}

func (h *holder) Name() string { return "holder" }

func (h *holder) OnStatement(st *plugins.Statement) plugins.Action {
	h.mu.Lock()
	h.held[st.ConnID] = true
	h.mu.Unlock()
	return plugins.Continue
}

func (h *holder) OnResult(*plugins.Statement, *plugins.Outcome) {}

func (h *holder) OnConn(ev plugins.ConnEvent) {
	if ev.Kind == plugins.ConnClosed {
		h.mu.Lock()
		delete(h.held, ev.ConnID)
		h.mu.Unlock()
	}
}

func (h *holder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// A panic at any stage of a statement ends that session alone, through
// the path every session ends by: the plugins hear that it closed (so
// what they held for it is released), the count of active sessions goes
// back, and the proxy serves the next session.
func TestPanicEndsSessionThroughTheOnePath(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	for _, stage := range []string{"statement", "answer", "result"} {
		t.Run(stage, func(t *testing.T) {
			h := &holder{held: map[uint32]bool{}}
			px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(h, &panicker{stage: stage}))
			idle, err := client.Connect(px.addr, user, "pw", db)
			if err != nil {
				t.Fatal(err)
			}
			defer idle.Close()
			if _, err := idle.Execute("SELECT 1"); err != nil {
				t.Fatal(err)
			}
			before := px.srv.active.Load()
			c, err := client.Connect(px.addr, user, "pw", db)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Execute("SELECT 1"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Execute("SELECT 'panic-here'"); err == nil && stage != "result" {
				t.Fatal("the statement whose plugin panicked was answered")
			}
			deadline := time.Now().Add(5 * time.Second)
			for px.srv.active.Load() != before || h.count() != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("after the panic: %d sessions active (before: %d), %d still held (want the idle one's)", px.srv.active.Load(), before, h.count())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The other session and the proxy go on.
			if _, err := idle.Execute("SELECT 1"); err != nil {
				t.Fatalf("another session after the panic: %v", err)
			}
			c2, err := client.Connect(px.addr, user, "pw", db)
			if err != nil {
				t.Fatalf("a new session after the panic: %v", err)
			}
			defer c2.Close()
			if r, err := c2.Execute("SELECT 2"); err != nil {
				t.Fatal(err)
			} else if n, _ := r.GetInt(0, 0); n != 2 {
				t.Fatalf("SELECT 2 answered %d", n)
			}
		})
	}
}
