// Command wasmcompile compiles WebAssembly modules into a wazero
// compilation cache directory the way conduit compiles standalone
// processors (see pkg/processor's newWasmRuntime), so that conduit loads
// them from the cache. The tests of pkg/processor run it, built without the
// race detector: compiling a Go module takes tens of seconds, and several
// minutes in a process built with -race.
//
//	go run -ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=<v> \
//		./testdata/wasmcompile <cache dir> <module.wasm>...
//
// wazero files its cache under its version, read from the binary's build
// information; a test binary's has no dependencies, so the tests read the
// cache of version "dev", and build this with the version they use
// (wazeroCacheVersion in standalone_test.go).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: wasmcompile <cache dir> <module.wasm>...")
		os.Exit(2)
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithCompilationCache(cache))
	defer rt.Close(ctx)
	for _, path := range os.Args[2:] {
		b, err := os.ReadFile(path)
		if err == nil {
			_, err = rt.CompileModule(ctx, b)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(1)
		}
	}
}
