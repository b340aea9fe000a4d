// Command otelcol-gpu-ctl is the command line of the fault console: it lists
// faults, quarantined nodes, the remediation breaker and the straggler
// heatmaps, and acknowledges faults, releases nodes and resets the breaker
// through the console's JSON API (extension/faultconsoleextension).
//
//	otelcol-gpu-ctl [--server URL] [--token-file F] [--operator NAME] [--json] <command>
//
// Exit status: 0 ok, 1 error (the API's message on stderr), 2 usage.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
