package cache

import (
	"regexp"
	"strconv"
	"sync"

	"tableproxy/cache/eval"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Accounts with a query limit. MAX_QUERIES_PER_HOUR counts the statements
// that reach the backend: a read answered from memory would not be
// counted, and the account would run more than its limit lets it. Its
// reads go to the backend instead. The limit is read once per user and
// state of the accounts (accountsID), with SHOW CREATE USER
// CURRENT_USER() on the session's own connection (MariaDB and MySQL both
// show the limits there); a user whose limit cannot be read is treated as
// limited.

var maxQueriesRE = regexp.MustCompile(`(?i)MAX_QUERIES_PER_HOUR\s+(\d+)`)

// queryLimits are the users known to have (or not) a query limit.
type queryLimits struct {
	mu    sync.Mutex
	users map[string]queryLimit
}

type queryLimit struct {
	limited  bool
	accounts lease.Version // accountsID's version when read
}

// queryLimited says why st's session's reads go to the backend when its
// user has a query limit.
func (p *Plugin) queryLimited(st *plugins.Statement, si *sessionInfo) eval.Why {
	if si.limitUser != st.User || !si.limitKnown {
		si.limitUser, si.limitKnown = st.User, true
		si.limited = p.limits.of(st, p.leases.Table(accountsID).Version())
	}
	if si.limited {
		return eval.Because(eval.QueryLimit, "the account has a MAX_QUERIES_PER_HOUR limit, which counts the statements the backend runs")
	}
	return eval.Why{}
}

// of reads (or recalls) whether st's user has a query limit.
func (l *queryLimits) of(st *plugins.Statement, accounts lease.Version) bool {
	l.mu.Lock()
	q, ok := l.users[st.User]
	l.mu.Unlock()
	if ok && q.accounts == accounts {
		return q.limited
	}
	if st.Backend == nil {
		return true
	}
	res, err := st.Backend.Query("SHOW CREATE USER CURRENT_USER()")
	if err != nil || res.RowNumber() == 0 {
		return true // (not remembered: asked again by the next session)
	}
	text, _ := res.GetString(0, 0)
	limited := false
	if m := maxQueriesRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		limited = n > 0
	}
	l.mu.Lock()
	if l.users == nil {
		l.users = map[string]queryLimit{}
	}
	l.users[st.User] = queryLimit{limited: limited, accounts: accounts}
	l.mu.Unlock()
	return limited
}
