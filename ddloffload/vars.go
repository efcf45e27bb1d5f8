package ddloffload

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"tableproxy/configs"
	"tableproxy/plugins"
)

// The jobs' knobs are system variables with the proxy's prefix, as TiDB's
// are (tidb_ddl_reorg_worker_cnt, tidb_ddl_reorg_batch_size, ...): set with
// SET [SESSION | GLOBAL], read with SELECT @@... and SHOW VARIABLES LIKE
// 'tableproxy_ddl%', answered by the proxy (the backend never sees them).
// A job takes the values of its session when it starts; the throttle
// thresholds are global only, and apply to running jobs at once. Global
// values start from the plugin's options and last until the proxy stops,
// as SET GLOBAL does in MySQL.
const varPrefix = "tableproxy_ddl_"

type varKind uint8

const (
	varInt  varKind = iota // a whole number in [min, max]
	varSize                // bytes: a number, or a string like '64M'
	varEnum                // one of values
	varPath                // an absolute directory
	varBool                // ON or OFF (also 1, 0, TRUE, FALSE)
)

type varDef struct {
	name       string // with the prefix
	kind       varKind
	min, max   int64
	values     []string
	globalOnly bool
}

var varDefs = []varDef{
	{name: varPrefix + "workers", kind: varInt, min: 1, max: 256},
	{name: varPrefix + "batch_size", kind: varInt, min: 32, max: 1 << 20},
	{name: varPrefix + "copy_method", kind: varEnum, values: []string{CopyInsertSelect, CopyReadAhead}},
	{name: varPrefix + "sort_memory", kind: varSize, min: 1 << 20, max: 1 << 40},
	{name: varPrefix + "strategy", kind: varEnum, values: []string{StrategyAuto, StrategyBackfill, StrategyNative}},
	{name: varPrefix + "lock_wait_timeout", kind: varInt, min: 1, max: 31536000},
	{name: varPrefix + "native_retries", kind: varInt, min: 1, max: 1000},
	{name: varPrefix + "temp_dir", kind: varPath, globalOnly: true},
	{name: varPrefix + "disk_quota", kind: varSize, min: 0, max: math.MaxInt64, globalOnly: true},
	{name: varPrefix + "max_threads_running", kind: varInt, min: 0, max: 1 << 20, globalOnly: true},
	{name: varPrefix + "max_replica_lag", kind: varInt, min: 0, max: 1 << 20, globalOnly: true},
	{name: varPrefix + "max_latency_pct", kind: varInt, min: 0, max: 1 << 20, globalOnly: true},
	{name: varPrefix + "postpone_cutover", kind: varBool},
	{name: varPrefix + "async", kind: varBool},
}

// Copy methods and strategies.
const (
	CopyInsertSelect = "insert_select" // INSERT ... SELECT per chunk, in the backend
	CopyReadAhead    = "read_ahead"    // rows read by the proxy, the next chunk while this one is written

	StrategyBackfill = "backfill" // the job's pipeline (shadow, copy, swap)
	StrategyNative   = "native"   // ALTER ... ALGORITHM=INPLACE, LOCK=NONE, guarded
)

func lookupVar(name string) (varDef, bool) {
	i := slices.IndexFunc(varDefs, func(d varDef) bool { return d.name == name })
	if i < 0 {
		return varDef{}, false
	}
	return varDefs[i], true
}

// normalize checks v for d and returns it in the form the variable shows.
func (d varDef) normalize(v any) (string, *mysql.MyError) {
	wrongValue := func() *mysql.MyError {
		return mysql.NewError(mysql.ER_WRONG_VALUE_FOR_VAR, fmt.Sprintf("Variable '%s' can't be set to the value of '%v'", d.name, v))
	}
	wrongType := mysql.NewError(mysql.ER_WRONG_TYPE_FOR_VAR, fmt.Sprintf("Incorrect argument type to variable '%s'", d.name))
	switch d.kind {
	case varInt, varSize:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case uint64:
			if x > math.MaxInt64 {
				return "", wrongValue()
			}
			n = int64(x)
		case string:
			if d.kind != varSize {
				return "", wrongType
			}
			var err error
			if n, err = configs.ParseByteSize(x); err != nil {
				return "", wrongValue()
			}
		default:
			return "", wrongType
		}
		if n < d.min || n > d.max {
			return "", wrongValue()
		}
		return strconv.FormatInt(n, 10), nil
	case varBool:
		switch x := v.(type) {
		case int64:
			if x == 0 || x == 1 {
				return [2]string{"OFF", "ON"}[x], nil
			}
		case string:
			switch strings.ToUpper(x) {
			case "ON", "TRUE":
				return "ON", nil
			case "OFF", "FALSE":
				return "OFF", nil
			}
		}
		return "", wrongValue()
	case varEnum:
		s, ok := v.(string)
		if !ok {
			return "", wrongType
		}
		s = strings.ToLower(s)
		if !slices.Contains(d.values, s) {
			return "", wrongValue()
		}
		return s, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", wrongType
	}
	if !path.IsAbs(s) {
		return "", wrongValue()
	}
	return path.Clean(s), nil
}

// vars holds the global values; sessions keep theirs in their
// plugins.SessionState.
type vars struct {
	mu      sync.RWMutex // guards global; read by running jobs' throttles
	global  map[string]string
	initial map[string]string // from the options: what DEFAULT sets
}

func newVars(o Options) *vars {
	g := map[string]string{
		varPrefix + "workers":             strconv.Itoa(o.Workers),
		varPrefix + "batch_size":          strconv.Itoa(o.ChunkRows),
		varPrefix + "copy_method":         o.CopyMethod,
		varPrefix + "sort_memory":         strconv.FormatInt(o.sortMemory, 10),
		varPrefix + "strategy":            o.Strategy,
		varPrefix + "lock_wait_timeout":   strconv.Itoa(max(1, int(time.Duration(o.LockWaitTimeout).Seconds()))),
		varPrefix + "native_retries":      strconv.Itoa(o.NativeRetries),
		varPrefix + "temp_dir":            o.TempDir,
		varPrefix + "disk_quota":          strconv.FormatInt(o.diskQuota, 10),
		varPrefix + "max_threads_running": strconv.Itoa(o.MaxThreadsRunning),
		varPrefix + "max_replica_lag":     strconv.Itoa(o.MaxReplicaLag),
		varPrefix + "max_latency_pct":     strconv.Itoa(*o.MaxLatencyPct),
		varPrefix + "postpone_cutover":    onOff(o.PostponeCutOver),
		varPrefix + "async":               "OFF",
	}
	return &vars{global: g, initial: maps.Clone(g)}
}

func (v *vars) getGlobal(name string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.global[name]
}

func (v *vars) globalInt(name string) int64 {
	n, _ := strconv.ParseInt(v.getGlobal(name), 10, 64)
	return n
}

// sessionVars is the key of a session's values in its SessionState.
type sessionVars struct{}

func sessionValues(st *plugins.Statement) map[string]string {
	if m, ok := st.Session.Get(sessionVars{}).(map[string]string); ok {
		return m
	}
	return nil
}

// value is what name means in the session (its own value, else the
// global one).
func (v *vars) value(st *plugins.Statement, name string) string {
	if s, ok := sessionValues(st)[name]; ok {
		return s
	}
	return v.getGlobal(name)
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// async reports whether st's session asked for ADD INDEX statements to
// return at once with their job's id (tableproxy_ddl_async).
func (v *vars) async(st *plugins.Statement) bool {
	return v.value(st, varPrefix+"async") == "ON"
}

// settings are the knobs a job started by st gets.
func (v *vars) settings(st *plugins.Statement) Settings {
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(v.value(st, varPrefix+name), 10, 64)
		return n
	}
	return Settings{
		Workers:         int(num("workers")),
		BatchSize:       int(num("batch_size")),
		CopyMethod:      v.value(st, varPrefix+"copy_method"),
		SortMemory:      num("sort_memory"),
		Strategy:        v.value(st, varPrefix+"strategy"),
		LockWaitTimeout: int(num("lock_wait_timeout")),
		NativeRetries:   int(num("native_retries")),
		TempDir:         v.value(st, varPrefix+"temp_dir"),
		DiskQuota:       num("disk_quota"),
		PostponeCutOver: v.value(st, varPrefix+"postpone_cutover") == "ON",
	}
}

// mentionsVars is the cheap test that spares the parser statements that
// cannot name the variables.
func mentionsVars(sql string) bool { return containsFold(sql, "tableproxy") }

// onVars answers SET, SELECT @@ and SHOW VARIABLES for the variables; ok is
// false for statements that are not about them.
func (p *Plugin) onVars(st *plugins.Statement) (plugins.Action, bool) {
	if st.Command != plugins.ComQuery || !mentionsVars(st.SQL) {
		return plugins.Continue, false
	}
	stmts, err := st.Parsed()
	if err != nil || len(stmts) != 1 {
		return plugins.Continue, false
	}
	switch s := stmts[0].(type) {
	case *ast.SetStmt:
		return p.setVars(st, s)
	case *ast.SelectStmt:
		return p.selectVars(st, s)
	case *ast.ShowStmt:
		return p.showVars(st, s)
	}
	return plugins.Continue, false
}

func (p *Plugin) setVars(st *plugins.Statement, s *ast.SetStmt) (plugins.Action, bool) {
	ours := 0
	for _, a := range s.Variables {
		if a.IsSystem && strings.HasPrefix(strings.ToLower(a.Name), varPrefix) {
			ours++
		}
	}
	switch {
	case ours == 0:
		return plugins.Continue, false
	case ours < len(s.Variables):
		return plugins.RefuseWith(errUnsupported("set tableproxy_ddl_* variables in a SET statement of their own")), true
	}
	type change struct {
		global      bool
		name, value string
	}
	var changes []change
	for _, a := range s.Variables {
		name := strings.ToLower(a.Name)
		d, ok := lookupVar(name)
		if !ok {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, fmt.Sprintf("Unknown system variable '%s'", a.Name))), true
		}
		if d.globalOnly && !a.IsGlobal {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_GLOBAL_VARIABLE, fmt.Sprintf("Variable '%s' is a GLOBAL variable and should be set with SET GLOBAL", name))), true
		}
		if a.IsGlobal && !st.Admin {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
				"Access denied; you need (at least one of) the SUPER privilege(s) for this operation")), true
		}
		var value string
		if _, isDefault := a.Value.(*ast.DefaultExpr); isDefault {
			// DEFAULT: the session takes the global value, the global
			// the plugin's option.
			value = ""
			if a.IsGlobal {
				value = p.vars.initial[name]
			}
		} else {
			v, ok := literal(a.Value)
			if !ok {
				return plugins.RefuseWith(mysql.NewError(mysql.ER_WRONG_TYPE_FOR_VAR, fmt.Sprintf("Incorrect argument type to variable '%s'", name))), true
			}
			var me *mysql.MyError
			if value, me = d.normalize(v); me != nil {
				return plugins.RefuseWith(me), true
			}
		}
		// Both may alias the statement's buffer, which the next command
		// overwrites.
		changes = append(changes, change{a.IsGlobal, strings.Clone(name), strings.Clone(value)})
	}
	// All checked: apply all, or none.
	for _, c := range changes {
		if c.global {
			p.vars.mu.Lock()
			p.vars.global[c.name] = c.value
			p.vars.mu.Unlock()
			p.log.Info("ddl: global variable set", "name", c.name, "value", c.value, "user", st.User)
			continue
		}
		m := maps.Clone(sessionValues(st))
		if m == nil {
			m = map[string]string{}
		}
		if c.value == "" {
			delete(m, c.name)
		} else {
			m[c.name] = c.value
		}
		st.Session.Set(sessionVars{}, m)
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error { return w.WriteResult(nil) })), true
}

// literal is the Go value of a SET's right-hand side: a number, a string,
// or a bare word (SET x = native, as MySQL allows for enumerations).
func literal(e ast.ExprNode) (any, bool) {
	switch x := e.(type) {
	case *test_driver.ValueExpr:
		switch v := x.GetValue().(type) {
		case int64, uint64, string:
			return v, true
		}
	case *ast.ColumnNameExpr:
		if x.Name.Table.O == "" {
			return x.Name.Name.O, true
		}
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Minus {
			if v, ok := literal(x.V); ok {
				if n, isInt := v.(int64); isInt {
					return -n, true
				}
			}
		}
	}
	return nil, false
}

// selectVars answers a SELECT whose fields are all the variables.
func (p *Plugin) selectVars(st *plugins.Statement, s *ast.SelectStmt) (plugins.Action, bool) {
	if s.From != nil || s.Where != nil || s.Fields == nil {
		return plugins.Continue, false
	}
	var names []string
	var row []any
	for _, f := range s.Fields.Fields {
		ve, ok := f.Expr.(*ast.VariableExpr)
		if !ok || !ve.IsSystem || !strings.HasPrefix(strings.ToLower(ve.Name), varPrefix) {
			return plugins.Continue, false
		}
		name := strings.ToLower(ve.Name)
		d, ok := lookupVar(name)
		if !ok {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, fmt.Sprintf("Unknown system variable '%s'", ve.Name))), true
		}
		if d.globalOnly && ve.ExplicitScope && !ve.IsGlobal {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_INCORRECT_GLOBAL_LOCAL_VAR, fmt.Sprintf("Variable '%s' is a GLOBAL variable", name))), true
		}
		v := p.vars.value(st, name)
		if ve.IsGlobal {
			v = p.vars.getGlobal(name)
		}
		col := f.AsName.O
		if col == "" {
			col = strings.TrimSpace(f.Text())
		}
		names = append(names, strings.Clone(col))
		row = append(row, typed(d, v))
	}
	return answerRows(names, [][]any{row}), true
}

// typed is a value as a result column shows it: numbers as BIGINT.
func typed(d varDef, v string) any {
	if d.kind == varInt || d.kind == varSize {
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return v
}

// showVars answers SHOW [SESSION | GLOBAL] VARIABLES LIKE 'pattern' when
// the pattern can only match the proxy's variables (it begins with
// "tableproxy"); SHOW VARIABLES without one is the backend's.
func (p *Plugin) showVars(st *plugins.Statement, s *ast.ShowStmt) (plugins.Action, bool) {
	if s.Tp != ast.ShowVariables || s.Pattern == nil || s.Where != nil {
		return plugins.Continue, false
	}
	pv, ok := s.Pattern.Pattern.(*test_driver.ValueExpr)
	if !ok {
		return plugins.Continue, false
	}
	pattern, ok := pv.GetValue().(string)
	if !ok || !strings.HasPrefix(strings.ToLower(strings.ReplaceAll(pattern, `\_`, "_")), "tableproxy") {
		return plugins.Continue, false
	}
	var rows [][]any
	for _, d := range varDefs {
		if !likeMatch(strings.ToLower(pattern), d.name) {
			continue
		}
		v := p.vars.value(st, d.name)
		if s.GlobalScope {
			v = p.vars.getGlobal(d.name)
		}
		rows = append(rows, []any{d.name, v})
	}
	return answerRows([]string{"Variable_name", "Value"}, rows), true
}

// likeMatch is SQL LIKE with % and _ and backslash escapes.
func likeMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch c := pattern[0]; {
	case c == '%':
		for i := 0; i <= len(s); i++ {
			if likeMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case c == '\\' && len(pattern) > 1:
		return s != "" && s[0] == pattern[1] && likeMatch(pattern[2:], s[1:])
	case c == '_':
		return s != "" && likeMatch(pattern[1:], s[1:])
	default:
		return s != "" && s[0] == c && likeMatch(pattern[1:], s[1:])
	}
}

// answerRows answers with a text result set.
func answerRows(cols []string, rows [][]any) plugins.Action {
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		if len(rows) == 0 {
			// go-mysql needs a row to type the columns; send the header only.
			blank := make([]any, len(cols))
			for i := range blank {
				blank[i] = ""
			}
			rs, err := plugins.TextResultset(cols, [][]any{blank})
			if err != nil {
				return w.WriteError(errJob("%v", err))
			}
			rs.Values, rs.RowDatas = nil, nil
			return w.WriteResult(&mysql.Result{Resultset: rs})
		}
		rs, err := plugins.TextResultset(cols, rows)
		if err != nil {
			return w.WriteError(errJob("%v", err))
		}
		w.Rows(uint64(len(rows)))
		return w.WriteResult(&mysql.Result{Resultset: rs})
	}))
}
