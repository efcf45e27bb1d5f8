package lograte

import (
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
