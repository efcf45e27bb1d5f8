package cluster

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

// A cluster whose members speak mutual TLS forms as a plain one does; a
// node without a certificate, or with one of another CA, cannot join it,
// and the cluster API answers no plain request.
func TestClusterRefusesANodeWithoutItsCertificate(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteCerts(dir, []string{"a", "b", "c"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := WriteCerts(t.TempDir(), []string{"x"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tlsOf := func(f TLSFiles) *TLSConfigs {
		c, err := LoadTLS(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := startMemberCfg(t, Config{ID: "a", DataDir: t.TempDir(), TLS: tlsOf(files[0])}, nil)
	waitUntil(t, 5*time.Second, "a leads", a.n.IsLeader)
	b := startMemberCfg(t, Config{ID: "b", DataDir: t.TempDir(), Join: a.n.Addr(), TLS: tlsOf(files[1])}, nil)
	waitUntil(t, 10*time.Second, "b a member with a lease", func() bool {
		list, _ := a.n.Members()
		return len(list) == 2 && b.m.LeaseValid()
	})

	plain := startMemberCfg(t, Config{ID: "plain", DataDir: t.TempDir(), Join: a.n.Addr()}, nil)
	stranger := startMemberCfg(t, Config{ID: "stranger", DataDir: t.TempDir(), Join: a.n.Addr(), TLS: tlsOf(other[0])}, nil)
	time.Sleep(2 * time.Second)
	if list, _ := a.n.Members(); len(list) != 2 {
		t.Fatalf("members after a plain node and one of another CA tried to join: %+v", list)
	}
	if plain.m.LeaseValid() || stranger.m.LeaseValid() {
		t.Fatal("a node outside the cluster holds a lease")
	}
	resp, err := http.Post("http://"+a.n.Addr()+"/cluster/v1/join", "application/json", bytes.NewReader([]byte(`{"id":"evil","addr":"127.0.0.1:1","voter":true}`)))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a plain join request was answered: %s", resp.Status)
	}
	// A third member with the cluster's certificate joins.
	c := startMemberCfg(t, Config{ID: "c", DataDir: t.TempDir(), Join: b.n.Addr(), TLS: tlsOf(files[2])}, nil)
	waitUntil(t, 10*time.Second, "c a member", func() bool {
		list, _ := a.n.Members()
		return len(list) == 3 && c.m.LeaseValid()
	})
}
