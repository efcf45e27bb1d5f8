package cache

import (
	"strconv"
	"testing"

	"tableproxy/lease"
	"tableproxy/plugins"
)

// TestPredictionsTellMissedWrites: a write seen in the log by a statement
// of a shape this proxy sent is missed when its account did not name the
// table, whatever the literals; a shape never sent is a bypass, and an
// account that named every table misses nothing.
func TestPredictionsTellMissedWrites(t *testing.T) {
	kv := lease.TableID{Schema: "db", Table: "kv"}
	other := lease.TableID{Schema: "db", Table: "other"}
	var ps predictions
	ps.record([]plugins.StmtInfo{{SQL: "SELECT 1"}, {SQL: "UPDATE kv SET v = 1 WHERE id = 2"}}, []lease.TableID{kv}, false)
	ps.record([]plugins.StmtInfo{{SQL: "INSERT INTO other (a) VALUES ('x')"}}, nil, false)
	ps.record([]plugins.StmtInfo{{SQL: "CALL p(1)"}}, []lease.TableID{kv}, true)
	for _, c := range []struct {
		text   string
		id     lease.TableID
		missed bool
	}{
		{"UPDATE kv SET v = 7 WHERE id = 9", kv, false},
		{"UPDATE kv SET v = 7 WHERE id = 9", other, true},
		{"INSERT INTO other (a) VALUES ('y')", kv, true}, // (a trigger the account did not know)
		{"INSERT INTO other (a) VALUES ('y')", other, true},
		{"DELETE FROM kv", kv, false}, // never sent through this proxy: a bypass
		{"CALL p(2)", kv, false},
	} {
		if got := ps.missedBy(c.text, c.id); got != c.missed {
			t.Errorf("%s writing %s: missed %v, want %v", c.text, c.id, got, c.missed)
		}
	}
	// The oldest shapes go once the bound is reached.
	for i := 0; i < maxPredictions; i++ {
		ps.record([]plugins.StmtInfo{{SQL: "SELECT " + string(rune('a'+i%26)) + " FROM t" + strconv.Itoa(i)}}, nil, false)
	}
	if ps.missedBy("UPDATE kv SET v = 7 WHERE id = 9", other) || len(ps.byShape) > maxPredictions {
		t.Errorf("after %d more shapes: %d kept, the oldest still there", maxPredictions, len(ps.byShape))
	}
}
