// Command tableproxy is a MySQL-protocol proxy. It only wires: the
// behaviour lives in the packages it builds, in the order serve.go reads.
package main

import (
	"errors"
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "check-config":
		err = checkConfig(os.Args[2:])
	case "ddl":
		err = ddl(os.Args[2:])
	case "cluster-certs":
		err = clusterCerts(os.Args[2:])
	case "version", "--version":
		fmt.Println("tableproxy", version)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "tableproxy: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tableproxy:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: tableproxy <command> [flags]

commands:
  serve     run the proxy (tableproxy serve --help for flags)
  check-config [--online] [serve's flags]
            check the configuration file and flags without starting:
            exit 0 valid, 1 invalid (each problem named), 2 bad command line;
            --online also logs in to the backend as every user and checks
            the binary log and the binlog user's rights
  ddl watch show the running DDL jobs with progress, rate and ETA (tableproxy ddl watch --help)
  cluster-certs --dir DIR --nodes a,b,c
            make a CA and a certificate per node for cluster.tls (mutual TLS
            between the members); an existing CA in DIR is used again
  version   print the version
`)
}
