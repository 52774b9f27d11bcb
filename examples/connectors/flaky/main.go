// Command flaky is an example standalone connector for conduit: a source
// that produces numbered records and a destination that appends records to
// a file, both of which fail on purpose as their fail.* settings say. It is
// built with pkg/sdk and meant as a template for connector authors; see
// README.md for its settings and how to build, install and use it.
package main

import (
	"os"
	"time"

	"github.com/conduitry/conduit/pkg/sdk"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	proc := process{exit: os.Exit, stderr: os.Stderr}
	clk := clock{now: time.Now, after: time.After}
	sdk.Serve(sdk.Plugin{
		Name:           "flaky",
		Version:        version,
		NewSource:      func() sdk.Source { return newSource(proc, clk) },
		NewDestination: func() sdk.Destination { return newDestination(proc) },
	})
}
