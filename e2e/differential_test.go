package e2e

import (
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	"tableproxy/internal/testdb"
)

// TestCachedReadsMatchBackend is the cache's differential test: a table
// with every common column type, several collations, NULLs, duplicates and
// edge values is cached, and thousands of random SELECTs of the shapes the
// cache answers (and some it does not) run through the proxy and directly
// against MariaDB, in the text and the binary protocol. Column metadata
// and every value must be identical, byte for byte, in the same order.
// TABLEPROXY_DIFF_SEED and TABLEPROXY_DIFF_QUERIES change the seed and
// the number of queries.
func TestCachedReadsMatchBackend(t *testing.T) {
	seed := int64(20261130)
	if s := os.Getenv("TABLEPROXY_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	queries := 1500
	if s := os.Getenv("TABLEPROXY_DIFF_QUERIES"); s != "" {
		queries, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d, %d queries", seed, queries)
	rng := rand.New(rand.NewSource(seed))

	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.d ("+
		"id INT PRIMARY KEY, "+
		"i INT NULL, u INT UNSIGNED NULL, b BIGINT NULL, ub BIGINT UNSIGNED NULL, t TINYINT NULL, s SMALLINT UNSIGNED NULL, "+
		"vbin VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, "+
		"vgen VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, "+
		"vuni VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, "+
		"vlat VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci NULL, "+
		"ch CHAR(5) NULL, dec1 DECIMAL(12,4) NULL, dt DATETIME(6) NULL, da DATE NULL, tm TIME(3) NULL, "+
		"bt BIT(10) NULL, js JSON NULL, en ENUM('a','b','c') NULL, fl FLOAT NULL, db DOUBLE NULL, "+
		"ts TIMESTAMP NULL DEFAULT NULL, bl BLOB NULL)")
	ints := []int64{0, 1, -1, 2, 7, 42, -42, 100, 2147483647, -2147483648}
	words := []string{"a", "A", "b", "é", "E", "zz", "Zz", "日本", "😀x", "", " x", "x "}
	var rows []string
	for id := 1; id <= 300; id++ {
		pick := func(f func() string) string {
			if rng.Intn(6) == 0 {
				return "NULL"
			}
			return f()
		}
		iv := func() string {
			v := ints[rng.Intn(len(ints))]
			if v > -1000 && v < 1000 {
				v += int64(rng.Intn(3)) // duplicates and near-misses around the edges
			}
			return strconv.FormatInt(v, 10)
		}
		uv := func() string { return strconv.Itoa(rng.Intn(60)) }
		wv := func() string { return "'" + words[rng.Intn(len(words))] + "'" }
		lat := func() string { return "'" + []string{"a", "A", "b", "x", "é"}[rng.Intn(5)] + "'" }
		rows = append(rows, fmt.Sprintf("(%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", id*3,
			pick(iv), pick(uv), pick(func() string { return []string{"9223372036854775807", "-9223372036854775808", iv()}[rng.Intn(3)] }),
			pick(func() string { return []string{"18446744073709551615", uv()}[rng.Intn(2)] }),
			pick(func() string { return strconv.Itoa(rng.Intn(255) - 128) }), pick(uv),
			pick(wv), pick(wv), pick(wv), pick(lat), pick(func() string { return "'" + []string{"ab", "ab  ", "x"}[rng.Intn(3)] + "'" }),
			pick(func() string { return fmt.Sprintf("%d.%04d", rng.Intn(2000)-1000, rng.Intn(10000)) }),
			pick(func() string {
				return fmt.Sprintf("'2026-%02d-%02d %02d:%02d:%02d.%06d'", 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(1000000)*[]int{0, 1}[rng.Intn(2)])
			}),
			pick(func() string { return []string{"'0000-00-00'", "'1999-12-31'", "'2026-02-28'"}[rng.Intn(3)] }),
			pick(func() string {
				return []string{"'-838:59:59'", "'00:00:00'", "'12:34:56.789'", "'100:00:01'"}[rng.Intn(4)]
			}),
			pick(func() string { return "b'" + strconv.FormatInt(int64(rng.Intn(1024)), 2) + "'" }),
			pick(func() string { return `'{"k": [1, 2.5, "x"], "n": null}'` }),
			pick(func() string { return []string{"'a'", "'b'", "'c'"}[rng.Intn(3)] }),
			pick(func() string { return []string{"0.1", "3.4028e38", "-1.5", "123456.789"}[rng.Intn(4)] }),
			pick(func() string {
				return []string{"0.1", "1e308", "-2.2250738585072014e-308", "3.141592653589793"}[rng.Intn(4)]
			}),
			pick(func() string { return "'2026-06-01 12:00:00'" }),
			pick(func() string { return "x'00ff10'" }),
		))
	}
	e.backend.Exec(t, "INSERT INTO `"+e.db+"`.d VALUES "+strings.Join(rows, ","))
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE d CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "d", "ready", 300, 1)

	textP := testdb.Open(t, testdb.DSN(e.proxy.addr, e.app.name, e.app.password, e.db, map[string]string{"charset": "utf8mb4"}))
	textD := testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.db, map[string]string{"charset": "utf8mb4"}))
	intCols := []string{"id", "i", "u", "b", "ub", "t", "s"}
	allCols := []string{"id", "i", "u", "b", "ub", "t", "s", "vbin", "vgen", "vuni", "vlat", "ch", "dec1", "dt", "da", "tm", "bt", "js", "en", "fl", "db", "ts", "bl"}
	lit := func() string {
		return strconv.FormatInt([]int64{0, 1, -1, 3, 6, 42, 45, 300, 450, 901, 2147483647, -2147483648, 9223372036854775807}[rng.Intn(13)]+int64(rng.Intn(3)-1), 10)
	}
	var cond func(depth int, params *[]any) string
	cond = func(depth int, params *[]any) string {
		val := func() string {
			if params != nil && rng.Intn(2) == 0 {
				v, _ := strconv.ParseInt(lit(), 10, 64)
				*params = append(*params, v)
				return "?"
			}
			return lit()
		}
		c := intCols[rng.Intn(len(intCols))]
		switch k := rng.Intn(9); {
		case depth > 0 && k == 0:
			return "(" + cond(depth-1, params) + " AND " + cond(depth-1, params) + ")"
		case depth > 0 && k == 1:
			return "(" + cond(depth-1, params) + " OR " + cond(depth-1, params) + ")"
		case depth > 0 && k == 2:
			return "NOT (" + cond(depth-1, params) + ")"
		case k == 3:
			return allCols[rng.Intn(len(allCols))] + []string{" IS NULL", " IS NOT NULL"}[rng.Intn(2)]
		case k == 4:
			return c + []string{" IN (", " NOT IN ("}[rng.Intn(2)] + val() + ", " + val() + ", " + val() + ")"
		case k == 5:
			return c + []string{" BETWEEN ", " NOT BETWEEN "}[rng.Intn(2)] + val() + " AND " + val()
		case k == 6:
			// Shapes the cache does not answer: they must pass through intact.
			return []string{"vgen = 'a'", "vuni < 'b'", "vlat = 'A'", "i + 1 > 3", "ch LIKE 'a%'", "dec1 > 0"}[rng.Intn(6)]
		}
		return c + " " + []string{"=", "<>", "<", "<=", ">", ">="}[rng.Intn(6)] + " " + val()
	}
	served := 0
	for q := 0; q < queries; q++ {
		var proj string
		switch k := rng.Intn(10); {
		case k < 2:
			proj = "*"
		case k < 4:
			// Aggregates over integer columns (and COUNT(*)).
			var as []string
			for j := 0; j <= rng.Intn(3); j++ {
				c := intCols[rng.Intn(len(intCols))]
				as = append(as, []string{"COUNT(*)", "COUNT(" + c + ")", "SUM(" + c + ")", "MIN(" + c + ")", "MAX(" + c + ")"}[rng.Intn(5)])
			}
			proj = strings.Join(as, ", ")
		case k == 4:
			// Functions the evaluator leaves to the backend: the result
			// cache answers them the second time.
			var fs []string
			for j := 0; j <= rng.Intn(3); j++ {
				fs = append(fs, []string{"CONCAT(vgen, '-', id)", "UPPER(vuni)", "LENGTH(vbin)", "COALESCE(i, -1) + 1",
					"DATE_FORMAT(dt, '%Y-%m %W')", "HEX(bl)", "ROUND(dec1, 1)", "LOWER(vlat)", "JSON_EXTRACT(js, '$.k')",
					"IF(u > 10, 'big', 'small')", "fl * 2", "CAST(ts AS CHAR)"}[rng.Intn(12)])
			}
			proj = strings.Join(fs, ", ")
		default:
			n := 1 + rng.Intn(5)
			var cs []string
			for j := 0; j < n; j++ {
				c := allCols[rng.Intn(len(allCols))]
				if rng.Intn(5) == 0 {
					c += " AS alias_" + strconv.Itoa(j)
				}
				cs = append(cs, c)
			}
			proj = strings.Join(cs, ", ")
		}
		binary := rng.Intn(2) == 0
		var params []any
		var pp *[]any
		if binary {
			pp = &params
		}
		sqlText := "SELECT " + proj + " FROM d"
		if rng.Intn(5) != 0 {
			sqlText += " WHERE " + cond(2, pp)
		}
		if rng.Intn(3) == 0 {
			k := intCols[1+rng.Intn(len(intCols)-1)]
			sqlText += " ORDER BY " + k + []string{"", " DESC"}[rng.Intn(2)] + ", id" + []string{"", " DESC"}[rng.Intn(2)]
		}
		if rng.Intn(3) == 0 {
			sqlText += fmt.Sprintf(" LIMIT %d", rng.Intn(20))
			if rng.Intn(2) == 0 {
				sqlText += fmt.Sprintf(" OFFSET %d", rng.Intn(20))
			}
		}
		run := func(db *sql.DB) string {
			var r *sql.Rows
			var err error
			if binary {
				// A prepared statement: the binary protocol, with or
				// without parameters.
				stmt, perr := db.Prepare(sqlText)
				if perr != nil {
					return "prepare error: " + perr.Error()
				}
				defer stmt.Close()
				r, err = stmt.Query(params...)
			} else {
				r, err = db.Query(sqlText)
			}
			if err != nil {
				return "error: " + err.Error()
			}
			return dumpRows(t, r)
		}
		// The first execution of a shape teaches the cache its metadata;
		// the second is answered from memory if the shape is covered.
		want := run(textD)
		for pass := 0; pass < 2; pass++ {
			before := hitsOf(t, admin, "d")
			if got := run(textP); got != want {
				t.Fatalf("query %d, execution %d differs (binary=%v, params %v):\n%s\nproxy:  %s\ndirect: %s", q, pass+1, binary, params, sqlText, got, want)
			}
			if pass == 1 && hitsOf(t, admin, "d") > before {
				served++
			}
		}
	}
	t.Logf("%d of %d queries answered from memory", served, queries)
	var resultHits int64
	if err := admin.QueryRow("SELECT result_hits FROM tableproxy.cached_tables WHERE table_name = 'd'").Scan(&resultHits); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answered from the result cache", resultHits)
	if resultHits == 0 {
		t.Error("no query was answered from the result cache: the test is not exercising it")
	}
	if served < queries/4 {
		t.Errorf("only %d of %d queries were answered from memory: the test is not exercising the cache", served, queries)
	}
}

func hitsOf(t *testing.T, db *sql.DB, table string) int64 {
	var n int64
	if err := db.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = '" + table + "'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// dumpRows renders column metadata and raw values.
func dumpRows(t *testing.T, r *sql.Rows) string {
	defer r.Close()
	var b strings.Builder
	cts, err := r.ColumnTypes()
	if err != nil {
		return "error: " + err.Error()
	}
	for _, ct := range cts {
		n, _ := ct.Nullable()
		p, s, _ := ct.DecimalSize()
		l, _ := ct.Length()
		fmt.Fprintf(&b, "%s:%s:%v:%d,%d:%d:%v ", ct.Name(), ct.DatabaseTypeName(), n, p, s, l, ct.ScanType())
	}
	vals := make([]sql.RawBytes, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for r.Next() {
		if err := r.Scan(ptrs...); err != nil {
			return "scan error: " + err.Error()
		}
		b.WriteString("|")
		for _, v := range vals {
			if v == nil {
				b.WriteString("NULL,")
			} else {
				fmt.Fprintf(&b, "%q,", []byte(v))
			}
		}
	}
	if err := r.Err(); err != nil {
		return "error: " + err.Error()
	}
	return b.String()
}
