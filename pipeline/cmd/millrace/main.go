// Command millrace runs every part of the millrace pipeline appliance: the
// broker, the agents that feed it and the sinks that drain it.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: millrace <command> [flags]

commands:
  up        run the whole appliance on this machine
  version   print the version
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "up":
		fmt.Println("millrace up: nothing to run yet — the broker arrives with the next release")
	case "version":
		fmt.Println("millrace", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "millrace: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
