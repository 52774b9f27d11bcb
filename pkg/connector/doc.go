// Package connector holds the contract between the engine and connectors
// (Source, Destination, Config), the Registry that turns a pipeline file's
// `plugin` into a connector, and the built-in connectors: generator, file
// and log.
//
// It is not the public SDK for outside authors (that is pkg/sdk, which adapts
// to these interfaces); built-in connectors implement them directly to stay
// on the fast path. This page is also the user reference for the built-in
// connectors' settings.
//
// # Plugin references
//
// A connector's `plugin` in a pipeline file has Conduit's form
// [builtin:|standalone:]name[@version]:
//
//	plugin: builtin:generator     # a built-in plugin
//	plugin: generator             # no prefix means builtin
//	plugin: builtin:file@v0.1.0   # the version is accepted and ignored (also @latest)
//
// Built-in plugins: builtin:generator (source), builtin:file (source and
// destination), builtin:log (destination). Standalone connectors are not
// supported yet.
//
// # Settings
//
// Settings are text (YAML numbers and booleans are read as their text). An
// empty value counts as not set, so the default applies. A misspelled or
// unknown setting is an error, except keys that start with "sdk.", which
// are Conduit's connector-SDK settings (see "Conduit SDK settings" below).
// Durations are written like 100ms, 1.5s or 1m30s.
//
// # builtin:generator (source)
//
// Generates records, for trying pipelines out and for load tests.
//
//	setting                  type      default     meaning
//	format.type              string    structured  structured: the payload is an object with
//	                                               one value per field; raw: the same object
//	                                               as JSON bytes; file: the content of the file
//	                                               format.options.path, read once at start
//	format.options.<field>   string    -           a field of the payload and its type: int,
//	                                               string, bool, time or duration (at least one
//	                                               field for structured and raw). An int field
//	                                               named id carries the record's sequence
//	                                               number; other ints are random. Strings are
//	                                               random words, time is the read time,
//	                                               duration random below 1h.
//	format.options.path      string    -           format.type file only: the file to read
//	operations               string    create      comma-separated list of create, update,
//	                                               delete, snapshot. Records cycle through the
//	                                               list in order (record 1 gets the first).
//	                                               An update has payload before and after, a
//	                                               delete only before, create and snapshot
//	                                               only after.
//	rate                     float     0           records per second; 0 means as fast as
//	                                               possible. After a stall, at most 1s worth of
//	                                               records is caught up.
//	recordCount              int       0           stop after this many records in total,
//	                                               counted across restarts (the position is the
//	                                               sequence number); 0 or -1 means unlimited.
//	                                               After the last record the source idles.
//	readTime                 duration  -           deprecated (Conduit): time to "read" one
//	                                               record; means rate = 1/readTime and is
//	                                               ignored when rate is set
//	burst.sleepTime          duration  0           pause between bursts; 0 means no bursts
//	burst.generateTime       duration  1s          length of a burst (only with burst.sleepTime)
//	collections.*            -         -           not supported yet (an error)
//
// Every record has: position and key = the sequence number as decimal text
// ("1", "2", ...); metadata opencdc.readAt and opencdc.createdAt (Unix
// nanoseconds), opencdc.version "v1" and conduit.source.connector.id. A
// source opened at position 7 continues with record 8.
//
// # builtin:file (source)
//
// Reads a text file line by line and follows it as it grows, like tail -f.
//
//	setting   type    default   meaning
//	path      string  required  the file to read
//
// Each line (without its newline; a trailing \r is dropped too) becomes a
// create record with payload.after = the line as raw bytes, key = the byte
// offset where the line starts, position = the byte offset just after its
// newline, and metadata file.path, opencdc.readAt, opencdc.version and
// conduit.source.connector.id. A restarted pipeline continues after the last
// acknowledged line. At the end of the file the source checks every 100ms
// for appended data; a last line without a newline is held back until its
// newline is written. The file must exist when the pipeline starts. A file
// truncated below what was read, a file replaced by another at the same path
// (rotation), or a line longer than 16 MiB stops the pipeline with an error
// naming the path and the offsets.
//
// # builtin:file (destination)
//
// Appends one OpenCDC JSON object per record per line, the shape Conduit's
// file destination writes (position and raw data base64, structured data as
// JSON objects).
//
//	setting   type    default   meaning
//	path      string  required  the file to append to; it and its directory are
//	                            created if missing (mode 0644)
//	sync      bool    false     fsync after every batch: slower, but an
//	                            acknowledged record survives a machine crash
//
// Each batch is written with a single write call. The file is also synced
// once when the pipeline stops.
//
// # builtin:log (destination)
//
// Logs every record through the runtime's logger (which carries pipeline_id
// and connector_id), with the record's OpenCDC JSON in the field "record".
//
//	setting   type    default          meaning
//	level     string  info             trace, debug, info, warn or error (trace is
//	                                   logged as debug). Records only show up when
//	                                   the runtime's log level lets this level through.
//	message   string  record received  the log message of each entry
//
// # Conduit SDK settings
//
// Settings that start with "sdk." configure Conduit's connector-SDK
// middleware. They are accepted so that a pipeline file written for Conduit
// runs unchanged; the values of the ones below are still checked.
//
//	sdk.record.format                   destinations: only opencdc/json (the default)
//	                                    is supported; anything else is an error
//	sdk.batch.size, sdk.batch.delay     checked (int, duration) and ignored: the
//	                                    engine batches records itself
//	sdk.rate.perSecond, sdk.rate.burst  destinations: checked and ignored (no
//	                                    per-destination rate limit yet)
//	sdk.schema.*.enabled                checked (bool) and ignored: there is no
//	                                    schema registry
//
// Every other sdk.* setting (sdk.record.format.options, sdk.schema.extract.*
// subjects and type, sdk.schema.context.name, ...) is accepted and ignored.
package connector
