package proxy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Clients kill with the connection id they were given in the handshake,
// which is the proxy's, not the backend's. The proxy numbers its sessions
// from proxyIDBase so that its ids never look like the backend's (which
// count up from 1), rewrites `KILL [QUERY|CONNECTION] <proxy id>` to the
// backend thread of that session, and passes any smaller id through as a
// backend thread id (as SELECT CONNECTION_ID() and SHOW PROCESSLIST report
// them). The rewritten KILL runs on the caller's own backend connection, so
// the backend's privilege checks still apply.
const proxyIDBase = 1 << 30

type killStmt struct {
	modifier string // HARD, SOFT or ""
	query    bool   // KILL QUERY, not the connection
	id       uint64
}

// parseKill recognises `KILL [HARD|SOFT] [CONNECTION|QUERY] <integer>`.
// Other forms (KILL QUERY ID, KILL USER, expressions) are not rewritten.
func parseKill(sql string) (killStmt, bool) {
	var k killStmt
	f := strings.Fields(strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n"))
	if len(f) < 2 || !strings.EqualFold(f[0], "KILL") {
		return k, false
	}
	f = f[1:]
	if len(f) > 1 && (strings.EqualFold(f[0], "HARD") || strings.EqualFold(f[0], "SOFT")) {
		k.modifier = strings.ToUpper(f[0])
		f = f[1:]
	}
	if len(f) > 1 {
		switch {
		case strings.EqualFold(f[0], "QUERY"):
			k.query = true
			f = f[1:]
		case strings.EqualFold(f[0], "CONNECTION"):
			f = f[1:]
		}
	}
	if len(f) != 1 {
		return k, false
	}
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return k, false
	}
	k.id = id
	return k, true
}

// kill carries out a KILL aimed at a proxy connection id (or passes a
// backend thread id through) and relays the backend's answer.
func (s *session) kill(query bool, modifier string, id uint64) error {
	target, backendID, found := s.srv.lookupSession(id)
	if !found {
		if id >= proxyIDBase {
			return s.client.writeError(mysql.NewError(mysql.ER_NO_SUCH_THREAD, fmt.Sprintf("Unknown thread id: %d", id)))
		}
		backendID = id
	}
	var b strings.Builder
	b.WriteString("KILL ")
	if modifier != "" {
		b.WriteString(modifier + " ")
	}
	if query {
		b.WriteString("QUERY ")
	} else {
		b.WriteString("CONNECTION ")
	}
	b.WriteString(strconv.FormatUint(backendID, 10))
	if err := s.sendQuery(b.String()); err != nil {
		return err
	}
	var st relayStats
	if err := s.relayOne(&st); err != nil {
		return err
	}
	if st.haveStat {
		s.setStatus(st.status)
	}
	if st.err == nil && !query && target != nil {
		// The backend closed that session's connection; close its client
		// too, as a server closes a killed connection.
		target.killed.Store(true)
		if target != s {
			_ = target.client.close()
		}
	}
	return nil
}

// parseUse returns the database a `USE db` statement selects.
func parseUse(sql string) (string, bool) {
	s := strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	if len(s) < 4 || !strings.EqualFold(s[:3], "USE") {
		return "", false
	}
	db := strings.TrimSpace(s[3:])
	if len(db) >= 2 && db[0] == '`' && db[len(db)-1] == '`' {
		db = strings.ReplaceAll(db[1:len(db)-1], "``", "`")
	}
	return db, db != ""
}
