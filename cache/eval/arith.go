package eval

import (
	"math"
	"math/big"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Integer arithmetic (+, -, * and unary minus), as MySQL computes it: the
// result is BIGINT UNSIGNED when an operand is unsigned (for subtraction,
// unless NO_UNSIGNED_SUBTRACTION is set), BIGINT otherwise, and a result
// outside its type's range is an error in the backend. The proxy computes
// the exact result and, when it does not fit, leaves the statement to the
// backend (RowCtx.fail), so that the client gets the backend's error.
// Literals above BIGINT's range, which would make a result UNSIGNED by
// their value, and parameters of prepared statements, whose types the
// backend infers, are left to the backend too.

var (
	minSigned   = big.NewInt(math.MinInt64)
	maxSigned   = big.NewInt(math.MaxInt64)
	maxUnsigned = new(big.Int).SetUint64(math.MaxUint64)
)

// arith evaluates an arithmetic operand: its value, or false for NULL
// (and for a value the proxy leaves to the backend, with r.fail set).
func (r *RowCtx) arith(o operand) (num, bool) {
	v, _, null := r.arithValue(o)
	if null || r.fail {
		return num{}, false
	}
	if v.Sign() < 0 {
		return num{neg: true, mag: new(big.Int).Neg(v).Uint64()}, true
	}
	return num{mag: v.Uint64()}, true
}

// arithValue returns o's exact value, whether its type is UNSIGNED, and
// whether it is NULL.
func (r *RowCtx) arithValue(o operand) (v *big.Int, unsigned, null bool) {
	switch o.kind {
	case opColumn:
		n, ok := r.operand(o)
		if !ok {
			return nil, false, true
		}
		return n.big(), o.unsigned, false
	case opLiteral, opParam:
		if o.kind == opParam && o.param < len(r.args) && r.args[o.param].bound {
			r.fail = true
			return nil, false, true
		}
		n, ok := r.operand(o)
		if !ok {
			return nil, false, true
		}
		if !n.neg && n.mag > math.MaxInt64 {
			r.fail = true
			return nil, false, true
		}
		return n.big(), false, false
	case opArith:
	default:
		r.fail = true
		return nil, false, true
	}
	a, ua, na := r.arithValue(o.args[0])
	if len(o.args) == 1 { // unary minus: signed
		if na {
			return nil, false, true
		}
		return r.fit(new(big.Int).Neg(a), false), false, r.fail
	}
	b, ub, nb := r.arithValue(o.args[1])
	if na || nb {
		return nil, false, true
	}
	res := new(big.Int)
	unsigned = ua || ub
	switch o.arith {
	case opcode.Plus:
		res.Add(a, b)
	case opcode.Minus:
		res.Sub(a, b)
		unsigned = unsigned && !r.env.NoUnsignedSubtraction
	case opcode.Mul:
		res.Mul(a, b)
	}
	return r.fit(res, unsigned), unsigned, r.fail
}

// fit returns v if it is in the range of its type, and otherwise sets
// r.fail: the backend reports the overflow.
func (r *RowCtx) fit(v *big.Int, unsigned bool) *big.Int {
	if unsigned && (v.Sign() < 0 || v.Cmp(maxUnsigned) > 0) || !unsigned && (v.Cmp(minSigned) < 0 || v.Cmp(maxSigned) > 0) {
		r.fail = true
	}
	return v
}

func (a num) big() *big.Int {
	v := new(big.Int).SetUint64(a.mag)
	if a.neg {
		v.Neg(v)
	}
	return v
}

// ResultUnsigned reports whether arithmetic o's type is BIGINT UNSIGNED
// (literals and parameters in arithmetic are always signed: see above).
func (o operand) ResultUnsigned(noUnsignedSubtraction bool) bool {
	switch o.kind {
	case opColumn:
		return o.unsigned
	case opArith:
		if len(o.args) == 1 {
			return false
		}
		u := o.args[0].ResultUnsigned(noUnsignedSubtraction) || o.args[1].ResultUnsigned(noUnsignedSubtraction)
		if o.arith == opcode.Minus && noUnsignedSubtraction {
			return false
		}
		return u
	}
	return false
}

// computeRows evaluates a plan's select list over rows: values as the
// text protocol prints them, nil for NULL.
func (p *Plan) computeRows(snap *Snapshot, rows []int, args []Arg, env RunEnv) ([][][]byte, Why) {
	r := &RowCtx{snap: snap, args: args, env: env, offs: make([]int, 0, len(snap.Fields)+1)}
	out := make([][][]byte, 0, len(rows))
	for _, i := range rows {
		if !r.SetRow(snap.Rows[i]) {
			return nil, Because(UnreadableRow, "a stored row could not be read")
		}
		row := make([][]byte, len(p.Items))
		for j, it := range p.Items {
			if it.Expr == nil {
				v, null, _ := r.Field(it.Col)
				switch {
				case null:
				case snap.Fields[it.Col].Type == mysql.MYSQL_TYPE_TIMESTAMP:
					var ok bool
					if row[j], ok = ShiftTimestamp(nil, v, env.TZOffset); !ok {
						return nil, Because(UnreadableRow, "a stored row could not be read")
					}
				default:
					row[j] = append([]byte{}, v...)
				}
				continue
			}
			n, ok := r.operand(*it.Expr)
			if r.fail {
				return nil, Because(ArithmeticOverflow, "integer arithmetic overflows (the backend reports the error), or has a literal beyond BIGINT or a prepared statement's parameter")
			}
			if ok {
				row[j] = n.print()
			}
		}
		out = append(out, row)
	}
	return out, Why{}
}

// print returns n as the text protocol prints a BIGINT.
func (a num) print() []byte {
	return []byte(a.big().String())
}

// checkArith evaluates the WHERE clause's arithmetic on every row of the
// table: a statement whose arithmetic overflows on any row is the
// backend's (see plan.whereArith).
func (p *Plan) checkArith(r *RowCtx) Why {
	if len(r.snap.Rows) > maxScanRows {
		return Because(TooManyRows, "arithmetic in WHERE on a table of more than 1024 rows")
	}
	for _, row := range r.snap.Rows {
		if !r.SetRow(row) {
			return Because(UnreadableRow, "a stored row could not be read")
		}
		for _, o := range p.whereArith {
			r.arith(o)
			if r.fail {
				return Because(ArithmeticOverflow, "integer arithmetic in WHERE overflows on a row (the backend may report the error), or has a literal beyond BIGINT or a prepared statement's parameter")
			}
		}
	}
	return Why{}
}
