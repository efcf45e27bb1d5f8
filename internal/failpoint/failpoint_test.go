package failpoint

import "testing"

func TestPanicsOnlyWhenArmedAndMarked(t *testing.T) {
	defer Arm("")
	panics := func(name, sql string) (p bool) {
		defer func() { p = recover() != nil }()
		Panic(name, sql)
		return false
	}
	if panics("a", "SELECT 1 "+Marker("a")) {
		t.Error("a point panicked unarmed")
	}
	Arm("a, b")
	if !panics("a", "SELECT 1 "+Marker("a")) || !panics("b", Marker("b")) {
		t.Error("an armed point did not panic on a marked statement")
	}
	if panics("a", "SELECT 1") || panics("a", Marker("b")) || panics("c", Marker("c")) {
		t.Error("a point panicked on a statement not marked for it, or unarmed")
	}
}
