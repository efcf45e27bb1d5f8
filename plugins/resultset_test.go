package plugins

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestTextResultsetAfterAClosedResult builds a result set after a wider
// one of other types went back to go-mysql's pool (Result.Close), which
// makes go-mysql's own builder keep the old column definitions.
func TestTextResultsetAfterAClosedResult(t *testing.T) {
	old, err := TextResultset([]string{"x", "y", "z"}, [][]any{{"s", int64(1), "t"}})
	if err != nil {
		t.Fatal(err)
	}
	(&mysql.Result{Resultset: old}).Close()
	for range 3 {
		rs, err := TextResultset([]string{"JOB_ID", "RESULT"}, [][]any{{int64(7), "ok"}, {int64(8), nil}})
		if err != nil {
			t.Fatal(err)
		}
		if string(rs.Fields[0].Name) != "JOB_ID" || string(rs.Fields[1].Name) != "RESULT" ||
			rs.Fields[0].Type != mysql.MYSQL_TYPE_LONGLONG || rs.Fields[1].Type != mysql.MYSQL_TYPE_VAR_STRING {
			t.Fatalf("columns %s %d, %s %d", rs.Fields[0].Name, rs.Fields[0].Type, rs.Fields[1].Name, rs.Fields[1].Type)
		}
		if len(rs.RowDatas) != 2 || string(rs.RowDatas[1]) != "\x018\xfb" {
			t.Fatalf("rows %q", rs.RowDatas)
		}
		(&mysql.Result{Resultset: rs}).Close()
	}
	if _, err := TextResultset([]string{"a"}, [][]any{{int64(1)}, {"x"}}); err == nil {
		t.Error("a column of two types was accepted")
	}
}
