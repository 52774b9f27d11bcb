// Package sdk is the connector SDK: the small, stable surface that people
// outside this repository write connectors against. A connector built with
// it is a standalone executable that the conduit runtime starts for every
// run of a pipeline and talks to over a unix socket (see Serve).
//
// It is not the engine's internal connector contract (pkg/connector) and it
// does not run pipelines: it only adapts a Source or a Destination to the
// plugin protocol of proto/conduitry/connector/v1. Everything a connector needs -
// the record types, the error helpers and code constants - is re-exported
// here, so a connector imports this package and nothing else of conduit.
//
// # Errors: what the runtime does with them
//
// Every error a connector returns ends the current run of the pipeline. The
// runtime then either restarts the pipeline on an exponential backoff
// (transient: status recovering) or stops it until a human starts it again
// (fatal: status degraded). It decides by a numeric, HTTP-like code that the
// connector attaches to the error:
//
//	code                    class      typical cause
//	408, 425, 429           transient  timeout, too early, rate limited
//	other 400-499           fatal      bad settings, bad credentials, a record
//	                                   that can never be written
//	501                     fatal      not implemented
//	other 500-599           transient  upstream down or overloaded
//	no code, unknown code   transient  the safe default: a restart is cheap,
//	                                   a needless stop pages a human
//
// Attach a code with Fatal (400 unless the error already has a fatal code),
// Transient (503 unless it already has a transient code) or WithCode (any
// code, e.g. an upstream HTTP status passed straight through). The code is
// found anywhere in the chain, so wrapping with fmt.Errorf("...: %w", err)
// or errors.Join keeps it. Errors without a code are transient, with one
// exception: an error from Configure without a code is sent as fatal (400),
// because settings do not fix themselves when the pipeline restarts.
//
// Serve sends every error across the process boundary as one JSON object
// in the text of a Connect error:
//
//	{"code":503,"message":"read: dial tcp 10.0.0.7:9092: connection refused","details":{...}}
//
// code is the classification's code (left out when the error has none),
// message the text of the whole chain, details those of WithDetails. An
// error whose own text already is such a JSON object (because it came from
// another process) keeps its code and message.
//
// # Writing a standalone connector
//
// Implement Source (Configure, Open, Read, Ack, Teardown), Destination
// (Configure, Open, Write, Teardown), or both. Parse and check the settings
// in Configure, connect in Open, release in Teardown. Return Fatal errors
// for what a restart cannot fix (settings, credentials, a record the
// upstream rejects with a 4xx) and Transient or WithCode(err, status) for
// the rest; wrap them freely with %w.
//
// Then write a main that hands the constructors to Serve, which never
// returns:
//
//	func main() {
//		sdk.Serve(sdk.Plugin{
//			Name:      "mysource",
//			Version:   "v0.1.0",
//			NewSource: func() sdk.Source { return &mySource{} },
//		})
//	}
//
// Build the executable into the runtime's connectors.path directory
// (./connectors by default), named like Plugin.Name, and refer to it in a
// pipeline file's plugin field as standalone:mysource:
//
//	go build -o connectors/mysource ./cmd/mysource
//
// Log to stderr: the runtime owns the process's output. Run by hand, the
// executable explains what it is and exits with status 2.
//
// examples/connectors/flaky in the conduit repository is a complete
// connector to start from; it also fails on purpose, to try the runtime's
// recovery.
//
// # How a run looks from the connector's side
//
// The runtime starts a new process for every run, so a connector instance
// lives exactly one run and need not be reusable:
//
//	source:       Configure -> Open(pos) -> Read, Read, ... (Ack alongside) -> Teardown
//	destination:  Configure -> Open -> Write, Write, ... -> Teardown
//
// The process exits after Teardown, on SIGTERM or SIGINT (after calling
// Teardown itself when the runtime did not), and when the runtime that
// started it has gone away. Anything that must outlive a run (a cursor, a
// counter) belongs in the source's Position or in external storage, not in
// memory.
package sdk
