package cache

import (
	"testing"

	"tableproxy/lease"
	"tableproxy/plugins"
)

// TestSessionTemps follows a session's temporary tables through the
// statements that name them and those that may make them unseen.
func TestSessionTemps(t *testing.T) {
	rates := lease.TableID{Schema: "shop", Table: "rates"}
	upper := lease.TableID{Schema: "SHOP", Table: "Rates"}
	var temps sessionTemps
	step := func(sql string, ok bool) {
		a, err := plugins.Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		temps.expect(a)
		temps.answered(ok)
	}
	step("CREATE TEMPORARY TABLE rates (id INT)", false)
	if temps.has(rates) || !temps.unknown {
		t.Fatal("a failed CREATE TEMPORARY TABLE must leave the names to be looked up, not known")
	}
	temps.reset()
	step("CREATE TEMPORARY TABLE rates (id INT)", true)
	if !temps.has(rates) || !temps.has(upper) {
		t.Fatal("the temporary table is not known (names compare without case)")
	}
	step("DROP TABLE rates", true)
	if temps.has(rates) {
		t.Fatal("DROP TABLE dropped the temporary table, which is still known")
	}
	temps.checked = map[string]bool{tempKey(rates): true}
	step("CALL make_temps()", true)
	if !temps.unknown || len(temps.checked) != 0 {
		t.Fatal("after CALL every cached table must be looked up again")
	}
}
