package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// AdminName is the name of the plugin that answers the cluster's admin SQL.
const AdminName = "cluster"

// ADMIN CLUSTER REMOVE NODE 'id' removes a dead member (TiDB spells its
// own admin statements ADMIN ...; the proxy's classifier already routes
// them here).
var removeNodeRE = regexp.MustCompile("(?is)^\\s*ADMIN\\s+CLUSTER\\s+REMOVE\\s+NODE\\s+(?:'([^']*)'|\"([^\"]*)\"|`([^`]*)`)\\s*;?\\s*$")

// Admin is the plugin for the cluster's admin SQL.
type Admin struct{ n *Node }

// NewAdmin returns the admin plugin of node n.
func NewAdmin(n *Node) *Admin { return &Admin{n: n} }

// Name implements plugins.Plugin.
func (a *Admin) Name() string { return AdminName }

// OnStatement implements plugins.StatementFilter.
func (a *Admin) OnStatement(st *plugins.Statement) plugins.Action {
	if st.Kind != plugins.KindAdmin {
		return plugins.Continue
	}
	m := removeNodeRE.FindStringSubmatch(st.SQL)
	if m == nil {
		return plugins.Continue
	}
	if !st.Admin {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
			"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation"))
	}
	id := m[1] + m[2] + m[3]
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if id == a.n.ID() {
			return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, "cannot remove the node this session is connected to; run it on another proxy"))
		}
		if err := a.n.RemoveNode(ctx, id); err != nil {
			if errors.Is(err, ErrUnknownNode) {
				return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, fmt.Sprintf("Unknown cluster node '%s'", id)))
			}
			return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy cluster: "+err.Error()))
		}
		return w.WriteResult(nil)
	}))
}

// MembersTable is tableproxy.cluster_members.
type MembersTable struct{ n *Node }

// NewMembersTable returns the virtual table of n's view of the membership.
func NewMembersTable(n *Node) MembersTable { return MembersTable{n: n} }

// Columns of tableproxy.cluster_members.
func (MembersTable) Columns() []string {
	return []string{"id", "address", "voter", "leader", "last_contact_ms", "applied_index", "self", "state", "remove_in_ms"}
}

// Numeric marks the BIGINT columns.
func (MembersTable) Numeric() map[string]bool {
	return map[string]bool{"last_contact_ms": true, "applied_index": true, "remove_in_ms": true}
}

// Rows lists the members. last_contact_ms is the time since this node
// applied the member's last lease renewal (-1: none yet); applied_index is
// the member's applied index as of that renewal (live for this node);
// state is live, unreachable, joining or leaving; remove_in_ms is, on the
// leader, how long until it removes a silent non-voter (-1: none due).
func (t MembersTable) Rows() [][]any {
	ms, err := t.n.Members()
	if err != nil {
		return nil
	}
	yes := func(b bool) string {
		if b {
			return "YES"
		}
		return "NO"
	}
	rows := make([][]any, 0, len(ms))
	for _, m := range ms {
		lc := int64(-1)
		if m.LastContact >= 0 {
			lc = m.LastContact.Milliseconds()
		}
		ri := int64(-1)
		if m.RemoveIn >= 0 {
			ri = m.RemoveIn.Milliseconds()
		}
		rows = append(rows, []any{m.ID, m.Address, yes(m.Voter), yes(m.Leader), lc, int64(m.AppliedIndex), yes(m.Self), m.State, ri})
	}
	return rows
}
