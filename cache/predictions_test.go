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
	ps.record([]plugins.StmtInfo{{SQL: "SELECT 1", DB: "db"}, {SQL: "UPDATE kv SET v = 1 WHERE id = 2", DB: "db"}}, []lease.TableID{kv}, false)
	ps.record([]plugins.StmtInfo{{SQL: "INSERT INTO other (a) VALUES ('x')", DB: "db"}}, nil, false)
	ps.record([]plugins.StmtInfo{{SQL: "CALL p(1)", DB: "db"}}, []lease.TableID{kv}, true)
	// The same text under another database writes another table: it says
	// nothing of db.kv, unless it names db.
	ps.record([]plugins.StmtInfo{{SQL: "UPDATE kv SET v = 3 WHERE id = 1", DB: "db2"}}, nil, false)
	ps.record([]plugins.StmtInfo{{SQL: "DELETE FROM db.kv WHERE id = 4", DB: "db2"}}, nil, false)
	// A statement listed by PREPARE runs later: the EXECUTE's account
	// judges it.
	ps.record([]plugins.StmtInfo{{SQL: "PREPARE s FROM 'REPLACE INTO kv VALUES (1, 2)'", DB: "db"},
		{SQL: "REPLACE INTO kv VALUES (1, 2)", DB: "db", Prepared: true}}, nil, false)
	// A later send of a shape that said less does not undo what an
	// earlier one said (either may be the one the log shows).
	ps.record([]plugins.StmtInfo{{SQL: "UPDATE kv SET v = 1 WHERE id = 2", DB: "db"}}, nil, false)
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
		{"UPDATE kv SET v = 5 WHERE id = 1", kv, false}, // sent under db too, naming kv
		{"UPDATE kv SET v = 5 WHERE id = 1", lease.TableID{Schema: "db3", Table: "kv"}, false},
		{"DELETE FROM db.kv WHERE id = 5", kv, true},
		{"REPLACE INTO kv VALUES (3, 4)", kv, false},
	} {
		if got := ps.missedBy(c.text, c.id); got != c.missed {
			t.Errorf("%s writing %s: missed %v, want %v", c.text, c.id, got, c.missed)
		}
	}
	// The oldest shapes go once the bound is reached.
	for i := 0; i < maxPredictions; i++ {
		ps.record([]plugins.StmtInfo{{SQL: "SELECT " + string(rune('a'+i%26)) + " FROM t" + strconv.Itoa(i), DB: "db"}}, nil, false)
	}
	if ps.missedBy("UPDATE kv SET v = 7 WHERE id = 9", other) || len(ps.byShape) > maxPredictions {
		t.Errorf("after %d more shapes: %d kept, the oldest still there", maxPredictions, len(ps.byShape))
	}
}
