package sqllex

// Stmt is one statement of a request: the text [Start, End) without its
// ';', and its tokens [From, To) in the request's token list.
type Stmt struct {
	Start, End int
	From, To   int
	// Block: a compound statement (BEGIN NOT ATOMIC, IF, CASE, LOOP,
	// REPEAT, WHILE, FOR, with a label or without) or the definition of a
	// stored program (CREATE PROCEDURE, FUNCTION, TRIGGER, EVENT,
	// PACKAGE), which holds statements of its own. Unbalanced: its
	// BEGIN ... END do not pair up, so where it ends is a guess.
	Block, Unbalanced bool
}

// Split returns the statements of a request, as the server separates
// them: at ';', except inside a compound statement or a stored program's
// body. toks are Tokens(sql, ...).
func Split(sql string, toks []Token) []Stmt {
	var out []Stmt
	for i := 0; i < len(toks); {
		if toks[i].IsPunct(sql, ";") {
			i++
			continue
		}
		end, block, ok := statementEnd(sql, toks, i)
		out = append(out, Stmt{Start: toks[i].Start, End: toks[end-1].End, From: i, To: end, Block: block, Unbalanced: !ok})
		i = end
	}
	return out
}

// statementEnd finds the end (the index of its ';', or len(toks)) of the
// statement whose first token is toks[i], whether it is a block, and
// whether its blocks pair up.
func statementEnd(sql string, toks []Token, i int) (end int, block, ok bool) {
	block = opensBlock(sql, toks, i)
	depth := 0
	for k := i; k < len(toks); k++ {
		t := toks[k]
		if t.Kind == Punct && sql[t.Start:t.End] == ";" {
			if depth == 0 {
				return k, block, true
			}
			continue
		}
		if !block || t.Kind != Word {
			continue
		}
		switch {
		case t.Is(sql, "END"):
			depth--
			if k+1 < len(toks) && isBlockWord(sql, toks[k+1]) {
				k++ // END IF, END LOOP, ...
			}
			if depth < 0 {
				depth = 0
				ok = false
				return len(toks), block, false
			}
		case opener(sql, toks, i, k):
			depth++
		}
	}
	return len(toks), block, depth == 0
}

// opensBlock reports whether the statement starting at toks[i] is a
// compound statement or a stored program's definition.
func opensBlock(sql string, toks []Token, i int) bool {
	if i+1 < len(toks) && (toks[i].Kind == Word || toks[i].Kind == Ident) && toks[i+1].IsPunct(sql, ":") {
		return true // label: BEGIN / LOOP / ...
	}
	t := toks[i]
	switch {
	case t.Is(sql, "BEGIN"):
		return i+2 < len(toks) && toks[i+1].Is(sql, "NOT") && toks[i+2].Is(sql, "ATOMIC")
	case t.Is(sql, "IF"), t.Is(sql, "CASE"), t.Is(sql, "LOOP"), t.Is(sql, "REPEAT"), t.Is(sql, "WHILE"), t.Is(sql, "FOR"):
		return true
	case t.Is(sql, "CREATE"):
		// CREATE [OR REPLACE] [DEFINER = ...] [AGGREGATE] PROCEDURE ...: the
		// object's kind comes before any '('.
		for k := i + 1; k < len(toks) && k < i+16; k++ {
			u := toks[k]
			if u.Kind == Punct && (sql[u.Start:u.End] == "(" || sql[u.Start:u.End] == ";") {
				return false
			}
			if u.Is(sql, "PROCEDURE") || u.Is(sql, "FUNCTION") || u.Is(sql, "TRIGGER") || u.Is(sql, "EVENT") || u.Is(sql, "PACKAGE") {
				return true
			}
			if u.Is(sql, "TABLE") || u.Is(sql, "VIEW") || u.Is(sql, "INDEX") || u.Is(sql, "USER") || u.Is(sql, "DATABASE") {
				return false
			}
		}
	}
	return false
}

// isBlockWord: the words that follow END to name what it ends.
func isBlockWord(sql string, t Token) bool {
	return t.Is(sql, "IF") || t.Is(sql, "CASE") || t.Is(sql, "LOOP") || t.Is(sql, "REPEAT") || t.Is(sql, "WHILE") || t.Is(sql, "FOR")
}

// opener reports whether toks[k], inside a block that starts at toks[from],
// opens something an END closes.
func opener(sql string, toks []Token, from, k int) bool {
	t := toks[k]
	switch {
	case t.Is(sql, "BEGIN"):
		// Inside a stored program BEGIN always opens a block
		// (transactions start with START TRANSACTION there).
		return true
	case t.Is(sql, "CASE"):
		return true // a CASE statement or expression: both end with END
	case t.Is(sql, "IF"):
		if k+1 < len(toks) && (toks[k+1].Is(sql, "EXISTS") || toks[k+1].Is(sql, "NOT") && k+2 < len(toks) && toks[k+2].Is(sql, "EXISTS")) {
			return false // IF [NOT] EXISTS
		}
		if statementStart(sql, toks, from, k) {
			return true
		}
		if k > from && inExpression(sql, toks[k-1]) {
			return false // the IF() function
		}
		return thenBeforeEnd(sql, toks, k)
	case t.Is(sql, "LOOP"), t.Is(sql, "REPEAT"), t.Is(sql, "WHILE"):
		return statementStart(sql, toks, from, k)
	case t.Is(sql, "FOR"):
		return statementStart(sql, toks, from, k) && !(k+1 < len(toks) && toks[k+1].Is(sql, "EACH"))
	}
	return false
}

// statementStart reports whether toks[k] starts a statement inside a
// block: first of all, or after ';', THEN, ELSE, DO, BEGIN [NOT ATOMIC],
// LOOP, REPEAT or a label.
func statementStart(sql string, toks []Token, from, k int) bool {
	if k == from {
		return true
	}
	p := toks[k-1]
	switch {
	case p.IsPunct(sql, ";"):
		return true
	case p.IsPunct(sql, ":"):
		return k-2 >= from && (toks[k-2].Kind == Word || toks[k-2].Kind == Ident)
	case p.Is(sql, "THEN"), p.Is(sql, "ELSE"), p.Is(sql, "DO"), p.Is(sql, "BEGIN"), p.Is(sql, "ATOMIC"),
		p.Is(sql, "LOOP"), p.Is(sql, "REPEAT"):
		return true
	}
	return false
}

// inExpression reports whether a token before IF puts it inside an
// expression, where IF is the IF() function.
func inExpression(sql string, p Token) bool {
	if p.Kind == Punct {
		return !p.IsPunct(sql, ")")
	}
	if p.Kind != Word {
		return false
	}
	for _, w := range [...]string{"SELECT", "WHERE", "AND", "OR", "XOR", "NOT", "WHEN", "ELSEIF", "IF", "ON",
		"HAVING", "BY", "SET", "RETURN", "VALUES", "VALUE", "AS", "IN", "IS", "LIKE", "BETWEEN", "DEFAULT",
		"UNTIL", "WHILE", "DISTINCT", "ALL", "ANY", "SOME", "CASE", "ELSE", "THEN", "DIV", "MOD", "REGEXP", "RLIKE",
		"INTERVAL", "USING", "LIMIT", "OFFSET"} {
		if p.Is(sql, w) {
			return true
		}
	}
	return false
}

// thenBeforeEnd reports whether a THEN follows toks[k] before the next
// ';' outside parentheses: the IF statement's, not the function's.
func thenBeforeEnd(sql string, toks []Token, k int) bool {
	depth := 0
	for j := k + 1; j < len(toks); j++ {
		t := toks[j]
		switch {
		case t.IsPunct(sql, "("):
			depth++
		case t.IsPunct(sql, ")"):
			depth--
		case t.IsPunct(sql, ";"):
			return false
		case depth == 0 && t.Is(sql, "THEN"):
			return true
		}
	}
	return false
}
