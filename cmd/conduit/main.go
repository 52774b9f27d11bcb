// Command conduit runs data pipelines and keeps them alive. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "conduit: %s\n", escapeControls([]byte(err.Error())))
		os.Exit(1)
	}
}
