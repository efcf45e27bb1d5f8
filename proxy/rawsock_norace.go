//go:build linux && !race

package proxy

// Without the race detector there is nothing to tell (rawsock_race.go); the
// calls compile away. The memory and address sanitizers need nothing from
// them either: Go's allocator marks its memory initialised when it hands it
// out, and a raw call passes exactly the slice's own bounds.

func raceRead([]byte)  {}
func raceWriting()     {}
func raceWrote([]byte) {}
