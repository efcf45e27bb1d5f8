package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"tableproxy/cluster"
)

// clusterCerts makes the certificates of a cluster's mutual TLS
// (cluster.WriteCerts), for cluster.tls.
func clusterCerts(args []string) error {
	fs := flag.NewFlagSet("cluster-certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the PEM files to (required)")
	nodes := fs.String("nodes", "", "comma-separated node names, one certificate each (required)")
	days := fs.Int("days", 3650, "validity of the certificates made, in days")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *dir == "" || *nodes == "" || *days <= 0 {
		return fmt.Errorf("%w: --dir and --nodes are required", errUsage)
	}
	var names []string
	for _, n := range strings.Split(*nodes, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	files, err := cluster.WriteCerts(*dir, names, time.Now().AddDate(0, 0, *days))
	if err != nil {
		return err
	}
	for i, f := range files {
		fmt.Printf("%s: cert %s, key %s, ca %s\n", names[i], f.Cert, f.Key, f.CA)
	}
	return nil
}
