// Package processor holds the contract between the engine and processors
// (Processor, Config, ErrFiltered), the Registry that turns a pipeline
// file's processor `plugin` into a Processor, field references, and the
// built-in processors: custom.javascript, field.set, field.exclude, filter
// and error, with Conduit's names and settings. Conduit's other built-in
// processors (json.decode, field.rename, ...) run with Conduit's own code
// through an adapter (Conduit, in conduit.go); docs/connectors.md lists
// them and what differs from Conduit. Conduit's clone and split turn one
// record into several: they are Splitters. It does not run processors: the
// engine (pkg/pipeline) does, and decides what happens to rejected records
// and to the records derived from one.
//
// This page is also the user reference for this package's own processors.
//
// # Example
//
//	version: "2.2"
//	pipelines:
//	  - id: users
//	    status: running
//	    connectors:
//	      - id: source
//	        type: source
//	        plugin: builtin:generator
//	        settings:
//	          format.options.id: int
//	          format.options.name: string
//	      - id: destination
//	        type: destination
//	        plugin: builtin:file
//	        settings:
//	          path: ./users.jsonl
//	    processors:
//	      - id: tag
//	        plugin: field.set
//	        settings:
//	          field: .Metadata.team
//	          value: '{{ .Payload.After.name }}-team'
//	      - id: drop-secrets
//	        plugin: builtin:field.exclude@v0.1.0
//	        settings:
//	          fields: .Payload.After.password, .Metadata["internal.token"]
//	      - id: drop-deletes
//	        plugin: filter
//	        condition: '{{ eq .Operation "delete" }}'
//	      - id: reject-anonymous
//	        plugin: error
//	        condition: '{{ not .Payload.After.name }}'
//	        settings:
//	          message: 'record {{ .Key }} has no name'
//
// # Plugin references
//
// A processor's `plugin` has Conduit's form [builtin:]name[@version]:
// field.set, builtin:field.set and builtin:field.set@v0.1.0 are the same
// processor (the version is accepted and ignored). Standalone (WASM)
// processors built with Conduit's processor SDK are found in
// processors.path (see Standalone and docs/connectors.md):
// standalone:<name>[@version], or <name> unprefixed, which is the
// standalone processor of that name when there is one, as in Conduit.
//
// # Settings
//
// Settings are text (YAML numbers and booleans are read as their text). An
// empty value counts as not set. A misspelled or unknown setting is an
// error naming it, except Conduit's processor-SDK schema settings, which are
// accepted on every processor so that a pipeline file written for Conduit
// runs unchanged. Records reach processors decoded, so they change nothing;
// their values are still checked:
//
//	sdk.schema.decode.key.enabled       bool
//	sdk.schema.decode.payload.enabled   bool
//	sdk.schema.encode.key.enabled       bool
//	sdk.schema.encode.payload.enabled   bool
//	sdk.schema.encode.type              avro
//	sdk.schema.encode.key.subject       string
//	sdk.schema.encode.payload.subject   string
//
// Settings, references and templates are all checked when the pipeline file
// is loaded, before anything runs.
//
// # condition
//
// Every processor accepts a `condition` (next to `plugin` and `settings`, not
// inside settings): a Go template rendered against each record. The
// processor runs only on records for which it renders true; other records
// pass through unchanged. The output is trimmed and read like Go's
// strconv.ParseBool (true, false, 1, 0, t, f, TRUE, ...). Output that is not
// a boolean rejects the record with an error starting "condition:"; a
// condition that is a constant other than a boolean is an error when the
// file is loaded. Examples:
//
//	condition: '{{ eq .Metadata.table "users" }}'
//	condition: '{{ and (eq .Operation "update") (gt .Payload.After.age 17) }}'
//	condition: '{{ ne (index .Metadata "opencdc.collection") "audit" }}'
//
// # Templates
//
// The field.set `value`, the error `message` and `condition` are Go
// templates (https://pkg.go.dev/text/template) whose dot is the record:
//
//	{{ .Position }}              the position, as text
//	{{ .Operation }}             create, update, delete or snapshot
//	{{ .Metadata.table }}        a metadata value
//	{{ index .Metadata "a.b" }}  a metadata value whose key is not an identifier
//	{{ .Key }}                   raw data prints as its text
//	{{ .Key.id }}                a field of a structured key
//	{{ .Payload.After.name }}    a field of the payload after the change
//	{{ .Payload.Before.a.b }}    a nested field of the payload before it
//
// The position, the operation and raw data are text, so
// {{ eq .Operation "delete" }} and {{ eq .Key "42" }} work (Conduit's
// {{ .Operation.String }} works too). Go's built-in functions work (eq, ne, lt, gt, and, or, not, index, len,
// printf, ...), and so do those of the Sprig library (Masterminds/sprig),
// the same set as in Conduit's templates: {{ upper .Metadata.table }},
// {{ hasPrefix "us" .Metadata.table }}, {{ .Metadata.x | default "none" }},
// {{ toJson .Payload.After }}, ... (also env and expandenv, which read
// conduit's environment, as under Conduit). A function that does not exist
// is a load-time error. Missing things are empty, not
// errors: a missing metadata key or field renders "" (where Go would print
// "<no value>"), and an absent key or payload behaves like an empty object,
// so {{ .Payload.Before.id }} on a create record renders "". Asking for a
// field inside something that has none (raw data, a string) fails for that
// record. Structured values print in Go's notation (map[a:1]).
//
// # Field references
//
// Settings that name a field use Conduit's reference syntax:
//
//	.Position                    read-only
//	.Operation
//	.Metadata                    all metadata
//	.Metadata.key                one metadata value
//	.Metadata["opencdc.readAt"]  keys that are not identifiers
//	.Key, .Key.id
//	.Payload                     before and after together
//	.Payload.Before, .Payload.Before.name
//	.Payload.After, .Payload.After.address.city
//	.Payload.After["first-name"], .Payload.After["a.b"].c
//
// A field written .name is letters, digits and underscores, not starting
// with a digit; write any other name quoted in brackets (Go string syntax,
// so \" and \\ escape).
//
// # builtin:field.set
//
// Sets a field to the text a template renders.
//
//	setting  type       default   meaning
//	field    reference  required  the field to set; not .Position, and not .Metadata
//	                              or .Payload as a whole (they cannot hold text)
//	value    template   required  the new value, e.g. '{{ .Payload.After.name }}-x'
//
// The value is always stored as a string. Setting .Key, .Payload.Before or
// .Payload.After as a whole makes it raw data (the text's bytes). Setting a
// field inside an absent key or payload first makes it structured data, and
// missing parent fields are created as objects; a field inside raw data is
// an error for that record (parse the data first). Setting .Operation needs
// one of create, update, delete or snapshot; a constant value is checked at
// load time, a rendered one per record.
//
// # builtin:field.exclude
//
// Removes fields.
//
//	setting  type        default   meaning
//	fields   references  required  comma-separated list of fields to remove,
//	                               e.g. .Metadata.secret, .Payload.After.password
//
// A metadata key or structured field is deleted with everything under it;
// .Key, .Payload.Before and .Payload.After become null; .Payload makes both
// null and .Metadata removes every key. Fields that do not exist are
// skipped, but, as in Conduit, the objects on their way are created when
// absent or null: excluding .Payload.After.password from a delete record
// (whose .Payload.After is null) leaves {} there, and .Metadata.x on a
// record without metadata leaves empty metadata. .Position and .Operation
// cannot be excluded. A field inside raw data is an error for that record.
// Commas inside ["..."] belong to the field name.
//
// # builtin:filter
//
// Drops every record it sees; it has no settings. With a condition it drops
// the records for which the condition is true. A dropped record goes no
// further, and is still acknowledged to the source.
//
// # builtin:error
//
// Rejects every record it sees with an error, for tests and for making bad
// records visible (usually with a condition).
//
//	setting  type      default                    meaning
//	message  template  error processor triggered  the error message (one that
//	                                              renders empty becomes the default)
//	code     int       -                          extension (not in Conduit): an
//	                                              HTTP-like error code, 100-599
//
// Without a code the error is fatal: processor errors without a code are,
// because running the same record again gives the same error, so the record
// is nacked (dead-letter queue) and, with the default DLQ settings, the
// pipeline is degraded. With a code the error is classified by the code
// table of package errors: code: 503 makes it transient, so the pipeline is
// restarted on backoff - a way to try error recovery out; code: 422 is
// fatal, as without one.
//
// # builtin:custom.javascript
//
// Runs a script's process(record) function on each record, with
// Conduit's settings and script API:
//
//	setting      type    default  meaning
//	script       string  -        the JavaScript code, with a function process(record)
//	script.path  string  -        a file with the code (one of the two)
//
// process returns the record (changed in place, or new Record()), or null
// (or nothing) to drop it; an exception rejects it with the exception's
// message. Record(), RawData([text]), StructuredData() and logger (the
// zerolog API; its output is discarded) are defined, as under Conduit. The
// script's top level runs when the processor is built, so a syntax error or
// a missing process function is reported when the pipeline file is loaded.
//
// What Conduit's does not: each call (the top level, and process for each
// record) is bounded by JavaScriptLimits, which conduit.yml's
// processors.javascript.* set - a timeout, and a budget on how much the
// heap grows while the call runs (see jsWatch for how it is measured and
// how precisely) - and is interrupted when the run's context ends (a
// forced stop). An interrupted call rejects its record with an error that
// names the limit, and the next record gets a fresh runtime. require()
// reads modules only from processors.javascript.require-path, by paths
// relative to it, and is refused when that is not set (see moduleLoader).
//
// # Errors while processing
//
// A processor that fails on a record rejects that record; the engine decides
// what follows (see pkg/pipeline). Errors name what failed: the reference
// (cannot use .Key.id: .Key holds raw data, not structured data), the
// setting whose template failed (setting "value": template: ...), or
// "condition:".
//
// # Concurrency
//
// A Registry is safe for concurrent use. A Processor is not: the engine
// calls each one from a single goroutine, and a processor reuses buffers
// between records. Build one per goroutine.
package processor
