package cluster

// The cluster's HTTP API on the Raft port (see mux.go): propose,
// revoke, swap (swaps.go), join and remove, and the client that calls it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hashicorp/raft"

	"tableproxy/lease"
)

// revokeRequest is a lease.Revocation on the wire.
type revokeRequest struct {
	Tables []lease.TableID `json:"tables"`
	Index  uint64          `json:"index,omitempty"`
	Intent string          `json:"intent,omitempty"`
}

// SendRevocation delivers a leader's revocation to the proxy at addr
// (lease.Log).
func (n *Node) SendRevocation(ctx context.Context, addr string, r lease.Revocation) error {
	body, err := json.Marshal(revokeRequest{Tables: r.Tables, Index: r.Index, Intent: r.Intent})
	if err != nil {
		return err
	}
	return n.post(ctx, addr, "/cluster/v1/revoke", body, nil)
}

type joinRequest struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// leaveRequest is a member asking to be removed (Node.Leave): the
// incarnation that asks, so that a late request from an earlier run of
// the node cannot remove the one that replaced it.
type leaveRequest struct {
	ID  string `json:"id"`
	Inc uint64 `json:"inc"`
}

// post sends a JSON body to a member's API and decodes the answer into out.
func (n *Node) post(ctx context.Context, addr, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.scheme()+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errForward, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusMisdirectedRequest, http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s: %s", errForward, addr, strings.TrimSpace(string(data)))
	case http.StatusForbidden:
		return fmt.Errorf("%w (%s)", ErrNotMember, addr)
	default:
		return fmt.Errorf("cluster: %s%s: %s", addr, path, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cluster/v1/propose", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var e entry
		if err == nil {
			e, err = unmarshalEntry(data)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if n.raft.State() != raft.Leader {
			http.Error(w, "not the leader", http.StatusMisdirectedRequest)
			return
		}
		idx, err := n.applyAsLeader(r.Context(), e, data)
		if err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, ErrNotMember) {
				status = http.StatusForbidden // not worth retrying: see Node.Renew
			}
			http.Error(w, err.Error(), status)
			return
		}
		writeJSON(w, map[string]uint64{"index": idx})
	})
	mux.HandleFunc("POST /cluster/v1/revoke", func(w http.ResponseWriter, r *http.Request) {
		var rr revokeRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if rr.Index == 0 {
			n.cfg.Leases.RevokeIntent(rr.Tables, rr.Intent)
		} else {
			n.cfg.Leases.Revoke(rr.Tables, rr.Index)
		}
		writeJSON(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /cluster/v1/swap", n.serveSwap)
	mux.HandleFunc("POST /cluster/v1/join", func(w http.ResponseWriter, r *http.Request) {
		var jr joinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&jr); err != nil || jr.ID == "" || jr.Addr == "" {
			http.Error(w, "want {id, addr, voter}", http.StatusBadRequest)
			return
		}
		if err := n.addMember(r.Context(), jr); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /cluster/v1/leave", func(w http.ResponseWriter, r *http.Request) {
		var lr leaveRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&lr); err != nil || lr.ID == "" {
			http.Error(w, "want {id, inc}", http.StatusBadRequest)
			return
		}
		if n.raft.State() != raft.Leader {
			http.Error(w, "not the leader", http.StatusMisdirectedRequest)
			return
		}
		answerRemoval(w, n.removeLeaving(r.Context(), lr))
	})
	mux.HandleFunc("POST /cluster/v1/remove", func(w http.ResponseWriter, r *http.Request) {
		var jr joinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&jr); err != nil || jr.ID == "" {
			http.Error(w, "want {id}", http.StatusBadRequest)
			return
		}
		answerRemoval(w, n.RemoveNode(r.Context(), jr.ID))
	})
	return mux
}

// answerRemoval answers a remove or leave request whose outcome is err.
func answerRemoval(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		writeJSON(w, map[string]bool{"ok": true})
	case errors.Is(err, ErrUnknownNode):
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
