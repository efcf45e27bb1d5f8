package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"tableproxy/cache"
	"tableproxy/proxy"
)

// health answers the probes an orchestrator sends, on the metrics
// listener: /healthz, the process answers (alive: do not restart it);
// /readyz, it serves as it should (ready: send it clients): the backend
// greets a new connection, this member knows its cluster's leader and has
// applied the log it knows committed, and, with tables cached, writes that
// bypass the proxy are seen (the binary log followed and caught up).
// While not ready it still serves: pass-through at once, cached tables
// from the backend.
type health struct {
	backend string
	node    *clusterNode
	cache   *cache.Plugin // nil without the cache plugin
}

// check is one condition of readiness: its name, and why it does not
// hold ("" when it does).
type check struct{ name, failing string }

func (h *health) checks(ctx context.Context) []check {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var cs []check
	backend := check{name: "backend"}
	if err := proxy.BackendGreets(ctx, h.backend); err != nil {
		backend.failing = err.Error()
	}
	cs = append(cs, backend)
	cluster := check{name: "cluster"}
	if ok, why := h.node.node.CaughtUp(); !ok {
		cluster.failing = why
	}
	cs = append(cs, cluster)
	if h.cache != nil {
		c := check{name: "binlog"}
		if ok, why := h.cache.Ready(); !ok {
			c.failing = why
		}
		cs = append(cs, c)
	}
	return cs
}

func (h *health) routes(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		ready := true
		for _, c := range h.checks(r.Context()) {
			if c.failing != "" {
				ready = false
				fmt.Fprintf(&b, "%s: not ready: %s\n", c.name, c.failing)
			} else {
				fmt.Fprintf(&b, "%s: ok\n", c.name)
			}
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, b.String())
	})
}
