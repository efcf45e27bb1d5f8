package ddloffload

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// Request is an intercepted ADD INDEX: which table, and which indexes.
type Request struct {
	Schema, Table string
	Indexes       []IndexDef
}

// IndexDef is one index to add, as the statement spelled it.
type IndexDef struct {
	Name    string // empty when the statement named none; preflight picks the name MySQL would
	Unique  bool
	Parts   []IndexPart
	Using   string // BTREE or HASH, when given
	Comment string
}

// IndexPart is one key part: a column, an optional prefix length, and order.
type IndexPart struct {
	Column string
	Length int
	Desc   bool
}

// Kind names the job type as ADMIN SHOW DDL JOBS shows it.
func (r *Request) Kind() string {
	for _, ix := range r.Indexes {
		if ix.Unique {
			return "add unique index"
		}
	}
	return "add index"
}

// clause renders the index as an ALTER TABLE ... ADD clause in MySQL syntax.
func (ix IndexDef) clause() string {
	var b strings.Builder
	b.WriteString("ADD ")
	if ix.Unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	b.WriteString(mysqlwire.QuoteIdent(ix.Name))
	b.WriteString(" (")
	for i, p := range ix.Parts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(mysqlwire.QuoteIdent(p.Column))
		if p.Length > 0 {
			fmt.Fprintf(&b, "(%d)", p.Length)
		}
		if p.Desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteString(")")
	if ix.Using != "" {
		b.WriteString(" USING " + ix.Using)
	}
	if ix.Comment != "" {
		// The job's own connections never have NO_BACKSLASH_ESCAPES in
		// their sql_mode (see sessionSetup), as QuoteString needs.
		b.WriteString(" COMMENT " + mysqlwire.QuoteString(ix.Comment))
	}
	return b.String()
}

// parseRequest reads sql as an ADD INDEX the job runner can take: ALTER
// TABLE with only ADD INDEX / ADD KEY / ADD UNIQUE clauses, or CREATE
// [UNIQUE] INDEX. Anything else (other clauses, FULLTEXT or SPATIAL,
// functional key parts, ALGORITHM or LOCK clauses, IF NOT EXISTS, ALTER
// IGNORE, options
// beyond USING and COMMENT, several statements) returns ok == false: the
// statement goes to the backend as it is.
func parseRequest(stmts []ast.StmtNode, err error, db string) (req *Request, ok bool) {
	if err != nil || len(stmts) != 1 {
		return nil, false
	}
	switch s := stmts[0].(type) {
	case *ast.AlterTableStmt:
		if len(s.Specs) == 0 || plugins.AlterIgnore(s.Text()) {
			// (MariaDB's ALTER IGNORE deletes the rows that duplicate a
			// new UNIQUE key; the job would fail on them instead.)
			return nil, false
		}
		req = newRequest(s.Table, db)
		for _, spec := range s.Specs {
			if spec.Tp != ast.AlterTableAddConstraint || spec.Constraint == nil || spec.IfNotExists {
				return nil, false
			}
			c := spec.Constraint
			var unique bool
			switch c.Tp {
			case ast.ConstraintIndex, ast.ConstraintKey:
			case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
				unique = true
			default:
				return nil, false
			}
			if c.IfNotExists {
				return nil, false
			}
			ix, ok := indexDef(c.Name, unique, c.Keys, c.Option)
			if !ok {
				return nil, false
			}
			req.Indexes = append(req.Indexes, ix)
		}
	case *ast.CreateIndexStmt:
		if s.IfNotExists || s.LockAlg != nil {
			return nil, false
		}
		var unique bool
		switch s.KeyType {
		case ast.IndexKeyTypeNone:
		case ast.IndexKeyTypeUnique:
			unique = true
		default:
			return nil, false
		}
		req = newRequest(s.Table, db)
		ix, ok := indexDef(s.IndexName, unique, s.IndexPartSpecifications, s.IndexOption)
		if !ok {
			return nil, false
		}
		req.Indexes = append(req.Indexes, ix)
	default:
		return nil, false
	}
	return req, true
}

func newRequest(tn *ast.TableName, db string) *Request {
	schema := tn.Schema.O
	if schema == "" {
		schema = db
	}
	return &Request{Schema: strings.Clone(schema), Table: strings.Clone(tn.Name.O)}
}

func indexDef(name string, unique bool, keys []*ast.IndexPartSpecification, opt *ast.IndexOption) (IndexDef, bool) {
	ix := IndexDef{Name: strings.Clone(name), Unique: unique}
	if len(keys) == 0 {
		return ix, false
	}
	for _, k := range keys {
		if k.Expr != nil || k.Column == nil {
			return ix, false // functional key parts go to the backend
		}
		ix.Parts = append(ix.Parts, IndexPart{Column: strings.Clone(k.Column.Name.O), Length: k.Length, Desc: k.Desc})
	}
	if opt != nil {
		if opt.KeyBlockSize > 0 || opt.ParserName.O != "" || opt.Visibility != ast.IndexVisibilityDefault ||
			opt.PrimaryKeyTp != ast.PrimaryKeyTypeDefault || opt.Global || opt.SplitOpt != nil {
			return ix, false
		}
		switch opt.Tp {
		case ast.IndexTypeInvalid:
		case ast.IndexTypeBtree:
			ix.Using = "BTREE"
		case ast.IndexTypeHash:
			ix.Using = "HASH"
		default:
			return ix, false
		}
		ix.Comment = strings.Clone(opt.Comment)
	}
	return ix, true
}
