package cluster

import (
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the node's gauges and counters for a dashboard: Raft's
// state, term and log indexes, leader changes, the members, and whether
// the cluster's word is that the binary log is watched.
func (n *Node) Metrics() []prometheus.Collector {
	stat := func(key string) func() float64 {
		return func() float64 {
			v, _ := strconv.ParseUint(n.raft.Stats()[key], 10, 64)
			return float64(v)
		}
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	members := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tableproxy_raft_members",
		Help: "The cluster's members in this node's configuration, by suffrage (voter, nonvoter)."}, []string{"suffrage"})
	return []prometheus.Collector{
		gauge("tableproxy_raft_leader", "1 while this node leads the cluster.", func() float64 { return bit(n.raft.State() == raft.Leader) }),
		gauge("tableproxy_raft_leader_known", "1 while this node knows a leader.", func() float64 { return bit(*n.leaderID.Load() != "") }),
		gauge("tableproxy_raft_term", "Raft's current term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("tableproxy_raft_commit_index", "The last log index this node knows committed.", stat("commit_index")),
		gauge("tableproxy_raft_applied_index", "The last log index applied here.", func() float64 { return float64(n.raft.AppliedIndex()) }),
		gauge("tableproxy_raft_last_log_index", "The last index in this node's log.", stat("last_log_index")),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_raft_leader_changes_total",
			Help: "Times the leader this node knows changed (an election, or the leader lost)."}, func() float64 { return float64(n.leaderChanges.Load()) }),
		gauge("tableproxy_cluster_binlog_watched", "1 while the leader's word is that it follows the binary log (memory reads may be served).",
			func() float64 { return bit(n.BinlogWatched()) }),
		membersCollector{n: n, vec: members},
	}
}

// membersCollector counts the members at each scrape.
type membersCollector struct {
	n   *Node
	vec *prometheus.GaugeVec
}

func (c membersCollector) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

func (c membersCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]float64{"voter": 0, "nonvoter": 0}
	if f := c.n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				counts["voter"]++
			} else {
				counts["nonvoter"]++
			}
		}
	}
	for k, v := range counts {
		c.vec.WithLabelValues(k).Set(v)
	}
	c.vec.Collect(ch)
}
