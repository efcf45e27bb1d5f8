package ddloffload

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// The throttle holds the copy (before each chunk) while the backend is
// busy or its replicas fall behind, as gh-ost's max-load and max-lag-millis
// do: tableproxy_ddl_max_threads_running against the backend's
// Threads_running, tableproxy_ddl_max_replica_lag against each configured
// replica's Seconds_Behind_Master. A replica that does not replicate (its
// SQL or IO thread stopped, or not a replica at all) counts as too far
// behind: copying on would only widen a gap nobody can see. Both are
// global variables read at every check, so a DBA can relieve or tighten a
// running job. 0 turns a check off.
type throttle struct {
	p   *Plugin
	r   *runner
	mu  sync.Mutex // guards why and replica connections
	why string
	rc  map[string]*client.Conn
}

// throttleEvery is how often the throttle measures.
const throttleEvery = 500 * time.Millisecond

// replica is one entry of the replicas option.
type replica struct{ user, password, addr string }

func parseReplica(s string) (replica, error) {
	cred, addr, ok := strings.Cut(s, "@")
	if !ok {
		return replica{}, fmt.Errorf("%q: want user:password@host:port", redact(s))
	}
	user, pw, _ := strings.Cut(cred, ":")
	if _, _, err := net.SplitHostPort(addr); err != nil || user == "" {
		return replica{}, fmt.Errorf("%q: want user:password@host:port", redact(s))
	}
	return replica{user, pw, addr}, nil
}

// redact hides a password in a replica entry.
func redact(s string) string {
	cred, addr, ok := strings.Cut(s, "@")
	if !ok {
		return "..."
	}
	user, _, _ := strings.Cut(cred, ":")
	return user + ":***@" + addr
}

// run measures until ctx ends.
func (t *throttle) run(ctx context.Context) {
	c, err := t.r.connect(ctx)
	if err != nil {
		t.r.log.Warn("ddl: throttle: cannot connect; not throttling", "err", err)
		return
	}
	defer c.Close()
	defer t.closeReplicas()
	tick := time.NewTicker(throttleEvery)
	defer tick.Stop()
	for {
		why := t.measure(ctx, c)
		t.mu.Lock()
		changed := why != t.why
		t.why = why
		t.mu.Unlock()
		if changed {
			if why != "" {
				t.r.log.Info("ddl: copy throttled", "why", why)
			} else {
				t.r.log.Info("ddl: copy no longer throttled")
			}
			t.r.rec.throttled.Store(&why)
		}
		select {
		case <-ctx.Done():
			empty := ""
			t.r.rec.throttled.Store(&empty)
			return
		case <-tick.C:
		}
	}
}

// measure returns why the copy must wait now, or "".
func (t *throttle) measure(ctx context.Context, c *client.Conn) string {
	if limit := t.p.vars.globalInt(varPrefix + "max_threads_running"); limit > 0 {
		res, err := c.Execute("SHOW GLOBAL STATUS LIKE 'Threads_running'")
		if err == nil && res.RowNumber() > 0 {
			n, _ := res.GetInt(0, 1)
			if n > limit {
				return fmt.Sprintf("Threads_running %d > tableproxy_ddl_max_threads_running %d", n, limit)
			}
		}
	}
	if limit := t.p.vars.globalInt(varPrefix + "max_replica_lag"); limit > 0 {
		for _, s := range t.p.opts.Replicas {
			rep, _ := parseReplica(s)
			lag, err := t.replicaLag(ctx, rep)
			switch {
			case err != nil:
				return fmt.Sprintf("replica %s: %v", rep.addr, err)
			case lag < 0:
				return fmt.Sprintf("replica %s is not replicating", rep.addr)
			case lag > limit:
				return fmt.Sprintf("replica %s lags %ds > tableproxy_ddl_max_replica_lag %d", rep.addr, lag, limit)
			}
		}
	}
	return ""
}

// replicaLag is the largest Seconds_Behind_Master of a replica's
// connections, -1 when one does not replicate or it has none.
func (t *throttle) replicaLag(ctx context.Context, rep replica) (int64, error) {
	t.mu.Lock()
	c := t.rc[rep.addr]
	t.mu.Unlock()
	if c == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		if c, err = client.ConnectWithContext(cctx, rep.addr, rep.user, rep.password, "", 5*time.Second); err != nil {
			return 0, err
		}
		t.mu.Lock()
		if t.rc == nil {
			t.rc = map[string]*client.Conn{}
		}
		t.rc[rep.addr] = c
		t.mu.Unlock()
	}
	res, err := c.Execute("SHOW ALL SLAVES STATUS")
	if err != nil {
		res, err = c.Execute("SHOW REPLICA STATUS") // MySQL
	}
	if err != nil {
		t.mu.Lock()
		delete(t.rc, rep.addr)
		t.mu.Unlock()
		c.Close()
		return 0, err
	}
	if res.RowNumber() == 0 {
		return -1, nil
	}
	lag := int64(0)
	for i := 0; i < res.RowNumber(); i++ {
		name := "Seconds_Behind_Master"
		v, err := res.GetValueByName(i, name)
		if err != nil {
			name = "Seconds_Behind_Source"
			if v, err = res.GetValueByName(i, name); err != nil {
				return 0, err
			}
		}
		if v == nil {
			return -1, nil
		}
		n, _ := res.GetIntByName(i, name)
		lag = max(lag, n)
	}
	return lag, nil
}

func (t *throttle) closeReplicas() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.rc {
		c.Close()
	}
	t.rc = nil
}

// wait returns once the copy may go on, or ctx ends.
func (t *throttle) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		why := t.why
		t.mu.Unlock()
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
