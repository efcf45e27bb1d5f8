package e2e

import (
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"regexp"
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
	words := []string{"a", "A", "b", "é", "E", "zz", "Zz", "日本", "😀x", "", " x", "x ", "ß", "ss", "SS", "É", "e", "ä", "a\t", "A ", "Ø", "ÿ", "_", "%x", "ab", "aB", "😁x", "prefix-long-1", "Prefix-long-0", "prefix-éé-2"}
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
		lat := func() string {
			return "'" + []string{"a", "A", "b", "x", "é", "É", "ä", "ß", "ss", "Ø", "ÿ", "y", "a "}[rng.Intn(13)] + "'"
		}
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
			pick(func() string {
				return []string{"'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "'0000-00-00 00:00:00'",
					fmt.Sprintf("'%d-%02d-%02d %02d:%02d:%02d'", 1971+rng.Intn(66), 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60))}[rng.Intn(4)]
			}),
			pick(func() string { return "x'00ff10'" }),
		))
	}
	e.backend.Exec(t, "INSERT INTO `"+e.db+"`.d VALUES "+strings.Join(rows, ","))
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE d CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "d", "ready", 300, 1)
	// A second table to join with d; its column names differ from d's.
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.d2 (jid INT PRIMARY KEY, did INT NULL, k INT NULL, "+
		"name VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, KEY (did))")
	var rows2 []string
	for j := 1; j <= 200; j++ {
		did := "NULL"
		if rng.Intn(8) != 0 {
			did = strconv.Itoa(3 * (1 + rng.Intn(320))) // some match no row of d
		}
		rows2 = append(rows2, fmt.Sprintf("(%d,%s,%d,'%s')", j, did, rng.Intn(12)-2, []string{"a", "A", "b", "é", "E", "zz"}[rng.Intn(6)]))
	}
	e.backend.Exec(t, "INSERT INTO `"+e.db+"`.d2 VALUES "+strings.Join(rows2, ","))
	if _, err := admin.Exec("ALTER TABLE d2 CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "d2", "ready", 200, 1)

	// Sessions in the server's zone and in two others: TIMESTAMPs are shown
	// in the session's zone. They differ in div_precision_increment too,
	// the scale of AVG (and rounded or truncated at multiples of 9), and in
	// max_sort_length.
	var viaProxy, direct []*sql.DB
	for i, zone := range []string{"", "'-07:00'", "'+05:45'", "'+01:00'"} {
		params := map[string]string{"charset": "utf8mb4"}
		if zone != "" {
			params["time_zone"] = zone
		}
		if dpi := []string{"", "0", "9", "1"}[i]; dpi != "" {
			params["div_precision_increment"] = dpi
		}
		if i == 3 {
			params["max_sort_length"] = "8" // strings sort by a prefix
		}
		viaProxy = append(viaProxy, testdb.Open(t, testdb.DSN(e.proxy.addr, e.app.name, e.app.password, e.db, params)))
		direct = append(direct, testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.db, params)))
	}
	intCols := []string{"id", "i", "u", "b", "ub", "t", "s"}
	strCols := []string{"vbin", "vgen", "vuni", "vlat", "ch", "bl"}
	strLit := func() string {
		w := words[rng.Intn(len(words))]
		if rng.Intn(8) == 0 {
			w = []string{"ab  ", "x", "Ä", "é ", "a\t", "\x00"}[rng.Intn(6)]
		}
		return w
	}
	likeLit := func() string {
		w := []rune(strLit())
		var b strings.Builder
		for _, r := range w {
			switch rng.Intn(5) {
			case 0:
				b.WriteString("%")
			case 1:
				b.WriteString("_")
				continue
			}
			b.WriteRune(r)
		}
		if rng.Intn(2) == 0 {
			b.WriteString("%")
		}
		return b.String()
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
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
		sval := func(s string) string {
			if params != nil && rng.Intn(2) == 0 {
				*params = append(*params, s)
				return "?"
			}
			return quote(s)
		}
		if rng.Intn(2) == 0 {
			// A string column compared by its collation.
			c := strCols[rng.Intn(len(strCols))]
			switch rng.Intn(5) {
			case 0:
				return c + []string{" IN (", " NOT IN ("}[rng.Intn(2)] + sval(strLit()) + ", " + sval(strLit()) + ", " + sval(strLit()) + ")"
			case 1:
				return c + []string{" BETWEEN ", " NOT BETWEEN "}[rng.Intn(2)] + sval(strLit()) + " AND " + sval(strLit())
			case 2:
				return c + []string{" LIKE ", " NOT LIKE "}[rng.Intn(2)] + sval(likeLit())
			}
			if rng.Intn(4) == 0 {
				return sval(strLit()) + " " + []string{"=", "<>", "<", "<=", ">", ">="}[rng.Intn(6)] + " " + c
			}
			return c + " " + []string{"=", "<>", "<", "<=", ">", ">="}[rng.Intn(6)] + " " + sval(strLit())
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
			return []string{"vgen = vuni", "vgen = _latin1'a'", "vlat = N'A'", "i DIV 2 > 3", "ch LIKE 'a%' ESCAPE '|'", "dec1 > 0", "vgen = 1", "i = '1'", "CONCAT(vgen, 'x') = 'ax'"}[rng.Intn(9)]
		case k == 7:
			// Integer arithmetic, overflowing on some rows.
			return []string{"i + 1 > ", "u - 5 < ", "b * 3 = ", "-t >= ", "(i + u) * 2 <> ", "ub - u > ", "t * s <= "}[rng.Intn(7)] + val()
		}
		return c + " " + []string{"=", "<>", "<", "<=", ">", ">="}[rng.Intn(6)] + " " + val()
	}
	// pkRange is a condition made of bounds on the primary key only, or
	// (the last two) one the key range alone does not decide.
	pkRange := func(params *[]any) string {
		lo := 1 + rng.Intn(300) // most bounds fall among the table's ids
		vals := []int{lo, lo + rng.Intn(12), lo + rng.Intn(12)}
		val := func() string {
			v := lit()
			if rng.Intn(4) != 0 {
				v, vals = strconv.Itoa(vals[0]), append(vals[1:], vals[0])
			}
			if params != nil && rng.Intn(2) == 0 {
				n, _ := strconv.ParseInt(v, 10, 64)
				*params = append(*params, n)
				return "?"
			}
			return v
		}
		switch rng.Intn(6) {
		case 0:
			return "id BETWEEN " + val() + " AND " + val()
		case 1:
			return "id >= " + val() + " AND id < " + val()
		case 2:
			return val() + " < id AND (id <= " + val() + " AND id > " + val() + ")"
		case 3:
			return "id = " + val()
		case 4:
			return "id BETWEEN " + val() + " AND " + val() + " AND id <> " + val()
		}
		return "id > " + val() + " AND i > " + val()
	}
	served := 0
	// Served queries by feature, so that a feature the cache silently stops
	// answering fails the test instead of passing through unnoticed.
	features := map[string]*regexp.Regexp{
		"string comparison": regexp.MustCompile(`(vbin|vgen|vuni|vlat|ch|bl) (=|<>|<|<=|>|>=) `),
		"string IN":         regexp.MustCompile(`(vbin|vgen|vuni|vlat|ch|bl) (NOT )?IN \(`),
		"string BETWEEN":    regexp.MustCompile(`(vbin|vgen|vuni|vlat|ch|bl) (NOT )?BETWEEN`),
		"LIKE":              regexp.MustCompile(` LIKE `),
		"primary-key range": regexp.MustCompile(`WHERE (id BETWEEN [-0-9?]+ AND [-0-9?]+|id >= [-0-9?]+ AND id < [-0-9?]+|[-0-9?]+ < id AND \(id <= [-0-9?]+ AND id > [-0-9?]+\))( ORDER| LIMIT|$)`),
		"ORDER BY string":   regexp.MustCompile(`ORDER BY .*(vbin|vgen|vuni|vlat|ch|bl)`),
		"DISTINCT":          regexp.MustCompile(`DISTINCT`),
		"TIMESTAMP":         regexp.MustCompile(`SELECT (\*|.*\bts\b)`),
		"GROUP BY":          regexp.MustCompile(`GROUP BY`),
		"AVG":               regexp.MustCompile(`AVG\(`),
		"join":              regexp.MustCompile(`JOIN|d2, d`),
		"LEFT JOIN":         regexp.MustCompile(`LEFT JOIN`),
		"FLOAT/DOUBLE":      regexp.MustCompile(`SELECT (\*|.*\b(fl|db)\b)`),
		"arithmetic":        regexp.MustCompile(`[a-z)] [-+*] [a-z0-9(?]|-t`),
	}
	servedBy := map[string]int{}
	for q := 0; q < queries; q++ {
		var proj string
		var distinctCols []string
		var groupCols []string
		switch k := rng.Intn(11); {
		case k == 10:
			// GROUP BY with aggregates, ordered by exactly its columns.
			all := append(append([]string{}, intCols[1:]...), strCols...)
			for j := 0; j <= rng.Intn(2); j++ {
				groupCols = append(groupCols, all[rng.Intn(len(all))])
			}
			as := append([]string{}, groupCols[:1+rng.Intn(len(groupCols))]...)
			for j := 0; j <= rng.Intn(3); j++ {
				c := intCols[rng.Intn(len(intCols))]
				as = append(as, []string{"COUNT(*)", "COUNT(" + c + ")", "SUM(" + c + ")", "MIN(" + c + ")", "MAX(" + c + ")", "AVG(" + c + ")"}[rng.Intn(6)])
			}
			rng.Shuffle(len(as), func(i, j int) { as[i], as[j] = as[j], as[i] })
			proj = strings.Join(as, ", ")
		case k == 9:
			// DISTINCT, ordered by exactly its columns.
			all := append(append([]string{}, intCols...), strCols...)
			for j := 0; j <= rng.Intn(2); j++ {
				distinctCols = append(distinctCols, all[rng.Intn(len(all))])
			}
			proj = "DISTINCT " + strings.Join(distinctCols, ", ")
		case k < 2:
			proj = "*"
		case k < 4:
			// Aggregates over integer columns (and COUNT(*)).
			var as []string
			for j := 0; j <= rng.Intn(3); j++ {
				c := intCols[rng.Intn(len(intCols))]
				as = append(as, []string{"COUNT(*)", "COUNT(" + c + ")", "SUM(" + c + ")", "MIN(" + c + ")", "MAX(" + c + ")", "AVG(" + c + ")"}[rng.Intn(6)])
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
				if rng.Intn(6) == 0 {
					c = []string{"i + 1", "u - 3", "b * 2", "-t", "(i + u) * 2", "ub + 1", "s * t - id", "i - u"}[rng.Intn(8)]
					if rng.Intn(2) == 0 {
						// The same shape with other literals and spacing:
						// the backend names the column as typed.
						c = fmt.Sprintf([]string{"i+%d", "u  -  %d", "b * %d", "%d + t"}[rng.Intn(4)], rng.Intn(20))
					}
				}
				switch rng.Intn(8) {
				case 0, 1:
					c += " AS alias_" + strconv.Itoa(j)
				case 2:
					// An alias named like another column: ORDER BY that
					// name sorts by the alias.
					c += " AS " + intCols[1+rng.Intn(len(intCols)-1)]
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
		switch rng.Intn(10) {
		case 0, 1:
		case 2:
			// Nothing but primary-key bounds: the cache takes the rows of
			// the key range without evaluating the condition.
			sqlText += " WHERE " + pkRange(pp)
		default:
			sqlText += " WHERE " + cond(2, pp)
		}
		if rng.Intn(8) == 0 {
			// Inner joins of the two cached tables (replacing the statement
			// built above, and its parameters).
			params = params[:0]
			on := []string{"d2.did = d.id", "d.i = d2.k", "d.id = d2.did AND d2.k > 0", "d2.k < d.t"}[rng.Intn(4)]
			var where string
			if rng.Intn(2) == 0 {
				where = " WHERE " + cond(1, pp)
			}
			// (Only total orders: rows that tie come in an order that changes
			// from one execution to the next in the backend itself.)
			order := []string{" ORDER BY d.id, d2.jid", " ORDER BY d2.jid DESC, d.id", " ORDER BY d2.k, d.id, d2.jid", ""}[rng.Intn(4)]
			switch rng.Intn(7) {
			case 5:
				sqlText = "SELECT d.id, d2.jid, d2.name, d2.k FROM d LEFT JOIN d2 ON " + on + []string{where, " WHERE d2.jid IS NULL", " WHERE d2.k > 3 OR d.i < 0"}[rng.Intn(3)] +
					[]string{" ORDER BY d.id, d2.jid", " ORDER BY d2.jid DESC, d.id DESC", " ORDER BY d2.name, d.id, d2.jid"}[rng.Intn(3)]
			case 6:
				sqlText = "SELECT COUNT(*), COUNT(d2.jid), SUM(d2.k) FROM d LEFT JOIN d2 ON " + on + where
			case 0:
				sqlText = "SELECT COUNT(*), SUM(d2.k), MAX(d.i) FROM d JOIN d2 ON " + on + where
			case 1:
				sqlText = "SELECT d2.name, COUNT(*), AVG(d.u) FROM d JOIN d2 ON " + on + where + " GROUP BY d2.name ORDER BY d2.name"
			case 2:
				sqlText = "SELECT * FROM d2, d WHERE " + on + strings.Replace(where, " WHERE ", " AND ", 1) + order
			case 3:
				sqlText = "SELECT a.jid, b.jid, a.name FROM d2 a JOIN d2 b ON a.k = b.k" + []string{" ORDER BY a.jid, b.jid", " ORDER BY b.jid DESC, a.jid"}[rng.Intn(2)]
			default:
				sqlText = "SELECT d.id, d2.jid, d2.k, d.vgen, d.i + d2.k FROM d INNER JOIN d2 ON " + on + where + order
			}
			if rng.Intn(3) == 0 {
				sqlText += fmt.Sprintf(" LIMIT %d", rng.Intn(20))
			}
			groupCols, distinctCols = nil, []string{}
		}
		if groupCols != nil {
			sqlText += " GROUP BY " + strings.Join(groupCols, ", ")
		}
		switch {
		case groupCols != nil:
			var by []string
			for _, c := range groupCols {
				by = append(by, c+[]string{"", " DESC"}[rng.Intn(2)])
			}
			sqlText += " ORDER BY " + strings.Join(by, ", ")
		case distinctCols != nil && len(distinctCols) == 0: // a join: ordered above
		case distinctCols != nil:
			var by []string
			for _, c := range distinctCols {
				by = append(by, c+[]string{"", " DESC"}[rng.Intn(2)])
			}
			sqlText += " ORDER BY " + strings.Join(by, ", ")
		case rng.Intn(3) == 0:
			var by []string
			for j := 0; j <= rng.Intn(2); j++ {
				k := intCols[1+rng.Intn(len(intCols)-1)]
				if rng.Intn(2) == 0 {
					k = strCols[rng.Intn(len(strCols))]
				}
				by = append(by, k+[]string{"", " DESC"}[rng.Intn(2)])
			}
			if rng.Intn(3) != 0 {
				by = append(by, "id"+[]string{"", " DESC"}[rng.Intn(2)])
			}
			sqlText += " ORDER BY " + strings.Join(by, ", ")
		}
		if rng.Intn(3) == 0 && !strings.Contains(sqlText, " LIMIT ") {
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
			return dumpRows(r)
		}
		// The first execution of a shape teaches the cache its metadata;
		// the second is answered from memory if the shape is covered.
		zone := rng.Intn(len(viaProxy))
		textP, textD := viaProxy[zone], direct[zone]
		want := run(textD)
		for pass := 0; pass < 2; pass++ {
			before := hitsOf(t, admin, "d")
			if got := run(textP); got != want {
				t.Fatalf("query %d, execution %d differs (binary=%v, params %v):\n%s\nproxy:  %s\ndirect: %s", q, pass+1, binary, params, sqlText, got, want)
			}
			if pass == 1 && hitsOf(t, admin, "d") > before {
				served++
				for name, re := range features {
					if re.MatchString(sqlText) {
						servedBy[name]++
					}
				}
			}
		}
	}
	t.Logf("%d of %d queries answered from memory; by feature: %v", served, queries, servedBy)
	for name := range features {
		if queries >= 1000 && servedBy[name] == 0 {
			t.Errorf("no query with %s was answered from memory", name)
		}
	}
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

// hitsOf counts the reads of table answered by the evaluator (hits, less
// those answered from the result cache).
func hitsOf(t *testing.T, db *sql.DB, table string) int64 {
	var n, results int64
	if err := db.QueryRow("SELECT hits, result_hits FROM tableproxy.cached_tables WHERE table_name = '"+table+"'").Scan(&n, &results); err != nil {
		t.Fatal(err)
	}
	return n - results
}

// dumpRows renders column metadata and raw values.
func dumpRows(r *sql.Rows) string {
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
