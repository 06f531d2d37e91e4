// Command millrace runs every part of the millrace pipeline appliance: the
// broker, the agents that feed it and the sinks that drain it, plus the client
// commands that manage topics and groups.
package main

import (
	"os"

	"millrace/pipeline/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
