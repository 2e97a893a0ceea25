// Command schemagen writes the JSON Schema of the spec format (run by
// `go generate ./internal/spec`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentflow/agentflow/internal/spec"
)

func main() {
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	b, err := spec.JSONSchema()
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
