package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Mutual TLS between the members. Every connection to a node's
// raft_listen address, Raft's and the cluster API's alike, is TLS, and
// both ends present a certificate signed by the cluster's CA: a process
// without one cannot join, vote, append to the log, or revoke a lease.
// The members' certificates are checked against the CA alone, not against
// a host name: members are named by the addresses they advertise, which
// move (pod IPs).

// TLSFiles names a node's certificate and key and the cluster's CA, in
// PEM files.
type TLSFiles struct {
	Cert, Key, CA string
}

// TLSConfigs are the server and client sides of a node's mutual TLS.
type TLSConfigs struct {
	Server, Client *tls.Config
}

// LoadTLS reads the files into the two sides' configurations.
func LoadTLS(f TLSFiles) (*TLSConfigs, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("cluster tls: %w", err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("cluster tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster tls: %s holds no PEM certificate", f.CA)
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error { return verifyMember(raw, pool) }
	return &TLSConfigs{
		Server: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
		// (The chain is checked by verify, against the CA only.)
		Client: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
			InsecureSkipVerify: true, VerifyPeerCertificate: verify},
	}, nil
}

// verifyMember checks that a peer's certificate chains to the cluster's CA.
func verifyMember(raw [][]byte, pool *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("cluster tls: the member presented no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("cluster tls: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("cluster tls: the member's certificate is not the cluster's: %w", err)
	}
	return nil
}

// scheme is the cluster API's URL scheme.
func (n *Node) scheme() string {
	if n.cfg.TLS != nil {
		return "https://"
	}
	return "http://"
}
