package sqllex

// Piece is a part of a compound statement that the server runs as a
// statement of its own (Expr false: UPDATE ..., SELECT ..., SET ...) or
// evaluates as an expression (an IF's condition, a DEFAULT, a RETURN's
// value): [Start, End) of the text.
type Piece struct {
	Start, End int
	Expr       bool
}

// Body returns the statements and expressions a compound statement or a
// stored program's body runs, in order, read from its tokens toks
// (toks[From:To] of a Stmt). ok is false when the block does not read as
// MariaDB's grammar of compound statements: the caller must then assume it
// may do anything.
func Body(sql string, toks []Token) (pieces []Piece, ok bool) {
	w := &walker{sql: sql, t: toks}
	w.statement()
	for w.i < len(w.t) && w.punct(";") {
		w.i++
	}
	return w.out, !w.bad && w.i == len(w.t)
}

type walker struct {
	sql string
	t   []Token
	i   int
	out []Piece
	bad bool
}

func (w *walker) at(word string) bool { return w.i < len(w.t) && w.t[w.i].Is(w.sql, word) }
func (w *walker) punct(p string) bool { return w.i < len(w.t) && w.t[w.i].IsPunct(w.sql, p) }

// expect consumes the word, or marks the block unreadable.
func (w *walker) expect(word string) {
	if !w.at(word) {
		w.bad = true
		return
	}
	w.i++
}

// statements reads statements, each ended by ';', until one of the words
// that end a list (END, ELSE, ELSEIF, WHEN, UNTIL) or the end.
func (w *walker) statements() {
	for !w.bad && w.i < len(w.t) {
		if w.at("END") || w.at("ELSE") || w.at("ELSEIF") || w.at("WHEN") || w.at("UNTIL") {
			return
		}
		if w.punct(";") {
			w.i++
			continue
		}
		w.statement()
		if w.i < len(w.t) {
			if !w.punct(";") {
				w.bad = true
				return
			}
			w.i++
		}
	}
}

// statement reads one statement, up to (not including) its ';'.
func (w *walker) statement() {
	if w.bad || w.i >= len(w.t) {
		return
	}
	if w.i+1 < len(w.t) && (w.t[w.i].Kind == Word || w.t[w.i].Kind == Ident) && w.t[w.i+1].IsPunct(w.sql, ":") {
		w.i += 2 // a label
	}
	switch {
	case w.at("BEGIN"):
		w.i++
		if w.at("NOT") {
			w.i++
			w.expect("ATOMIC")
		}
		w.statements()
		w.end("")
	case w.at("IF"):
		w.i++
		w.expr("THEN")
		w.expect("THEN")
		w.statements()
		for w.at("ELSEIF") {
			w.i++
			w.expr("THEN")
			w.expect("THEN")
			w.statements()
		}
		if w.at("ELSE") {
			w.i++
			w.statements()
		}
		w.end("IF")
	case w.at("CASE"):
		w.i++
		if !w.at("WHEN") {
			w.expr("WHEN")
		}
		for w.at("WHEN") {
			w.i++
			w.expr("THEN")
			w.expect("THEN")
			w.statements()
		}
		if w.at("ELSE") {
			w.i++
			w.statements()
		}
		w.end("CASE")
	case w.at("LOOP"):
		w.i++
		w.statements()
		w.end("LOOP")
	case w.at("REPEAT"):
		w.i++
		w.statements()
		w.expect("UNTIL")
		w.expr("END")
		w.end("REPEAT")
	case w.at("WHILE"):
		w.i++
		w.expr("DO")
		w.expect("DO")
		w.statements()
		w.end("WHILE")
	case w.at("FOR"):
		w.i++
		w.forHead()
		w.expect("DO")
		w.statements()
		w.end("FOR")
	case w.at("DECLARE"):
		w.declare()
	case w.at("RETURN"):
		w.i++
		w.expr("")
	case w.at("LEAVE"), w.at("ITERATE"), w.at("OPEN"), w.at("CLOSE"), w.at("FETCH"), w.at("SIGNAL"),
		w.at("RESIGNAL"), w.at("GET"):
		// Flow and cursors: they touch no table (a cursor's SELECT is its
		// DECLARE's, a condition's values are literals or variables).
		w.skipToEnd()
	default:
		from := w.i
		w.skipToEnd()
		w.piece(from, w.i, false)
	}
}

// end reads END [what] [label].
func (w *walker) end(what string) {
	w.expect("END")
	if what != "" {
		w.expect(what)
	}
	if w.i < len(w.t) && !w.punct(";") && (w.t[w.i].Kind == Word || w.t[w.i].Kind == Ident) {
		if isBlockWord(w.sql, w.t[w.i]) {
			w.bad = true // END IF closing a BEGIN
			return
		}
		w.i++ // the label
	}
}

// forHead reads FOR's "var IN (SELECT ...)", "var IN [REVERSE] a .. b" or
// "var IN cursor [(args)]", up to DO.
func (w *walker) forHead() {
	w.i++ // the variable
	w.expect("IN")
	if w.bad {
		return
	}
	if w.punct("(") && w.i+1 < len(w.t) && (w.t[w.i+1].Is(w.sql, "SELECT") || w.t[w.i+1].Is(w.sql, "WITH")) {
		close := w.matching(w.i)
		w.piece(w.i+1, close, false)
		w.i = close + 1
		return
	}
	if w.at("REVERSE") {
		w.i++
	}
	// a .. b (or a cursor's name and arguments): expressions split at "..".
	from := w.i
	for w.i < len(w.t) && !w.at("DO") {
		if w.punct(".") && w.i+1 < len(w.t) && w.t[w.i+1].IsPunct(w.sql, ".") {
			w.piece(from, w.i, true)
			w.i += 2
			from = w.i
			continue
		}
		if w.punct("(") {
			w.i = w.matching(w.i) + 1
			continue
		}
		w.i++
	}
	w.piece(from, w.i, true)
}

// declare reads a DECLARE: of a cursor (its SELECT is a statement), a
// handler (its statement), a condition, or variables (their DEFAULT).
func (w *walker) declare() {
	from := w.i
	w.i++
	if w.at("CONTINUE") || w.at("EXIT") || w.at("UNDO") {
		w.i++
		w.expect("HANDLER")
		w.expect("FOR")
		// Conditions: SQLEXCEPTION, SQLWARNING, NOT FOUND, SQLSTATE
		// [VALUE] '...', an error number or a condition's name, by commas.
		for !w.bad && w.i < len(w.t) {
			switch {
			case w.at("NOT"):
				w.i++
				w.expect("FOUND")
			case w.at("SQLSTATE"):
				w.i++
				if w.at("VALUE") {
					w.i++
				}
				w.i++
			default:
				w.i++
			}
			if !w.punct(",") {
				break
			}
			w.i++
		}
		w.statement()
		return
	}
	for k := w.i; k < len(w.t) && !w.t[k].IsPunct(w.sql, ";"); k++ {
		switch {
		case w.t[k].Is(w.sql, "CURSOR"):
			for k < len(w.t) && !w.t[k].Is(w.sql, "FOR") && !w.t[k].IsPunct(w.sql, ";") {
				if w.t[k].IsPunct(w.sql, "(") {
					k = w.matching(k)
				}
				k++
			}
			if k >= len(w.t) || !w.t[k].Is(w.sql, "FOR") {
				w.bad = true
				return
			}
			w.i = k + 1
			start := w.i
			w.skipToEnd()
			w.piece(start, w.i, false)
			return
		case w.t[k].Is(w.sql, "CONDITION"):
			w.skipToEnd()
			return
		case w.t[k].Is(w.sql, "DEFAULT"):
			w.i = k + 1
			start := w.i
			w.skipToEnd()
			w.piece(start, w.i, true)
			return
		}
	}
	_ = from
	w.skipToEnd()
}

// expr reads an expression up to the word stop (outside parentheses and
// CASE ... END), or to ';' when stop is "".
func (w *walker) expr(stop string) {
	from := w.i
	cases := 0
	for w.i < len(w.t) {
		t := w.t[w.i]
		switch {
		case t.IsPunct(w.sql, ";"):
			w.piece(from, w.i, true)
			return
		case t.IsPunct(w.sql, "("):
			w.i = w.matching(w.i) + 1
			continue
		case t.Is(w.sql, "CASE"):
			cases++
		case t.Is(w.sql, "END") && cases > 0:
			cases--
		case stop != "" && cases == 0 && t.Is(w.sql, stop):
			w.piece(from, w.i, true)
			return
		}
		w.i++
	}
	w.piece(from, w.i, true)
}

// skipToEnd moves to the ';' that ends the current statement (outside
// parentheses), or to the end.
func (w *walker) skipToEnd() {
	for w.i < len(w.t) && !w.punct(";") {
		if w.punct("(") {
			w.i = w.matching(w.i)
		}
		w.i++
	}
}

// matching returns the index of the ')' that closes the '(' at k (or the
// last token).
func (w *walker) matching(k int) int {
	depth := 0
	for j := k; j < len(w.t); j++ {
		switch {
		case w.t[j].IsPunct(w.sql, "("):
			depth++
		case w.t[j].IsPunct(w.sql, ")"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	w.bad = true
	return len(w.t) - 1
}

func (w *walker) piece(from, to int, expr bool) {
	if from >= to || to > len(w.t) {
		return
	}
	w.out = append(w.out, Piece{Start: w.t[from].Start, End: w.t[to-1].End, Expr: expr})
}
