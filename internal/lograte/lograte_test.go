package lograte

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestOneLinePerIntervalWithTheCountHeld(t *testing.T) {
	l := &Limiter{Every: 50 * time.Millisecond}
	if ok, held := l.Allow("a"); !ok || held != 0 {
		t.Fatalf("first: %v %d", ok, held)
	}
	for i := 0; i < 5; i++ {
		if ok, _ := l.Allow("a"); ok {
			t.Fatal("allowed within the interval")
		}
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key held back")
	}
	time.Sleep(60 * time.Millisecond)
	if ok, held := l.Allow("a"); !ok || held != 5 {
		t.Fatalf("after the interval: %v, held %d, want 5", ok, held)
	}
}

func TestHandlerHoldsBackRepeatedWarnings(t *testing.T) {
	var buf strings.Builder
	log := slog.New(NewHandler(slog.NewTextHandler(&buf, nil), 50*time.Millisecond))
	for i := 0; i < 100; i++ {
		log.Warn("backend lost", "conn", i)
		log.Info("a line", "n", i)
	}
	time.Sleep(60 * time.Millisecond)
	log.Warn("backend lost", "conn", 100)
	log.Warn("at warn", "err", errors.New("failed\ngoroutine 1 [running]:\nmain.main()"))
	log.Error("at error", "stack", "a\nb\nc")
	out := buf.String()
	if n := strings.Count(out, `msg="backend lost"`); n != 2 {
		t.Errorf("%d warnings written, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "repeated=99") {
		t.Errorf("no line says 99 were held back:\n%s", out)
	}
	if n := strings.Count(out, `msg="a line"`); n != 100 {
		t.Errorf("%d INFO lines, want all 100", n)
	}
	if strings.Contains(out, "goroutine 1") || !strings.Contains(out, `err="failed [2 more lines]"`) {
		t.Errorf("a stack trace below ERROR:\n%s", out)
	}
	if !strings.Contains(out, `stack="a\nb\nc"`) {
		t.Errorf("ERROR lines keep their stack:\n%s", out)
	}
}
