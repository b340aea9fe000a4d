// Command docscheck checks what the documentation says against the
// repository, and prints each stale statement as file:line: what is wrong.
// make lint runs it from the repository root (go run ./test/docscheck);
// -root names another checkout. It checks:
//
//   - paths: every repository path named in Markdown (in text, code and
//     link targets) and in the YAML comments under distributions/ and
//     deploy/ exists (paths.go);
//   - numbers: "N built-in fields" is the dcgm receiver's catalogue length
//     (fields.go);
//   - components: every component of README.md's "Components" table is in
//     an ocb manifest, of its kind, with its type and in the distributions
//     the table names (components.go).
//
// It exits 1 when something is stale, 2 when it could not check.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	problems, err := Check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "docscheck: %d stale statements in the docs\n", len(problems))
		os.Exit(1)
	}
}
