// Package connector holds the contract between the engine and connectors
// (Source, Destination, Config), the Registry that turns a pipeline file's
// `plugin` into a connector, and the built-in connectors: generator, file,
// log and chaos.
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
// destination), builtin:log (destination), builtin:chaos (source and
// destination), and Conduit's own connectors builtin:postgres,
// builtin:kafka and builtin:s3 (source and destination each; their
// settings are the connectors' own, see docs/connectors.md).
//
// standalone:<name> runs the executable <name> in connectors.path (a
// conduit.yml key, ./connectors by default) as a separate process, started
// anew for every run of the pipeline and spoken to over a unix socket in a
// private directory (see proto/conduitry/connector/v1 and pkg/sdk, with which such
// connectors are written). A missing or non-executable file, or one that
// does not answer the handshake within connectors.start-timeout, degrades
// the pipeline with a message saying which; a plugin that dies mid-run is a
// transient error naming its exit status and last stderr lines.
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
// nanoseconds) and conduit.source.connector.id ("pipeline:connector", as
// Conduit writes it). A source opened at position 7 continues with record 8.
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
// newline, and metadata file.path, opencdc.readAt and
// conduit.source.connector.id ("pipeline:connector"). A restarted pipeline continues after the last
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
//	follow-symlinks bool false  write through a symbolic link at path; without
//	                            it such a link is refused (fatal)
//
// Conduit's own files (Config.Protected: the store's directory, the
// configuration file, the pipeline files) are refused as a fatal error
// naming the path, checked before anything is created and again on the
// opened file, so links and ".." do not get around it.
//
// Each batch is written with a single write call. The file is also synced
// once when the pipeline stops.
//
// The destination never changes bytes it did not write. Content already in
// the file stays as it is; when it does not end with a newline (a text file
// without one, a binary file), a newline is written before the first record
// and a warning names the path. A process killed in the middle of a write
// can leave a partial last line of records that were never acknowledged:
// the next run cuts exactly that off, because the runtime's store recorded
// the file (device, inode, birth time) and the offset the crashed run
// started at; in any other file nothing is cut. A block device, a directory
// or a socket at path is refused; /dev/stdout, /dev/null and named pipes
// work.
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
// # builtin:chaos (source and destination)
//
// Fails on purpose, to test alerting and the runtime's recovery: a transient
// error makes the pipeline restart on backoff (status recovering), a fatal
// one stops it (status degraded). The source produces exactly the records of
// builtin:generator and takes all its settings, with the same defaults and
// the same positions (a restarted source resumes after the last acknowledged
// record); when no format.options.* is given it uses format.options.id: int,
// so it works without settings. The destination discards records, or, when
// path is set, appends them exactly like builtin:file (path and sync as
// there), so a test can see what was written.
//
// Without fail.on a chaos connector never fails. The fail.* settings, the
// same for both roles:
//
//	setting        type      default                  meaning
//	fail.on        string    -                        the operation that fails: open, read or
//	                                                  ack (source); open or write (destination)
//	fail.after     int       0                        the first failure comes once this many
//	                                                  records passed the operation (read:
//	                                                  produced; ack: acknowledged; write:
//	                                                  written; open: successful opens)
//	fail.every     int       0                        after a failure, fail again once this
//	                                                  many more records (opens) passed; 0 means
//	                                                  every call fails from then on
//	fail.duration  duration  0                        stop failing this long after the first
//	                                                  failure; 0 means no time limit
//	fail.count     int       0                        stop failing after this many failures;
//	                                                  0 means no limit
//	fail.code      int       503                      the error's code, 100-599 (see the table
//	                                                  in package errors: 503 is transient, 400
//	                                                  fatal, ...); not with fail.format text
//	fail.format    string    typed                    typed: a Go error carrying the code;
//	                                                  json: an error whose text is the wire JSON
//	                                                  {"code":503,"message":"..."}, the way a
//	                                                  standalone connector reports it; text: a
//	                                                  plain error without a code (transient)
//	fail.message   string    chaos: injected failure  the error message
//	fail.partial   bool      false                    destination, fail.on write: a failing
//	                                                  write still writes the first half of the
//	                                                  batch and reports it, so only those
//	                                                  records are acknowledged
//	fail.record    bool      false                    destination, fail.on write: the error
//	                                                  names the record the write stopped at
//	                                                  (cerrors.ForRecord), so a dead-letter
//	                                                  rule can take it
//
// The error names the connector, the operation and which failure it is, e.g.
//
//	chaos source "flaky": read: chaos: injected failure (failure 2 of 3)
//
// ("of 3" only with fail.count). Precisely: a read returns at most the
// records left before the failure point, and the next read fails; a write
// writes the records before the failure point and fails at the next record
// (with fail.partial also half of the rest); an ack that would cross the
// failure point fails as a whole. Once a stop condition (fail.count,
// fail.duration) is met, the connector works normally. fail.duration is
// measured from the first failure and also bounds fail.every.
//
// The counts survive restarts: the runtime builds new connectors for every
// restart, and the counts live in the runtime, per pipeline, connector id
// and role, until the process exits. Records delivered again after a
// restart count again. Changing any fail.* setting starts the counts over.
//
// A network blip that heals after 3 failures: the first three reads after
// record 50 fail with 503 (transient); each makes the pipeline restart,
// and the fourth attempt runs on.
//
//	connectors:
//	  - id: flaky-source
//	    type: source
//	    plugin: builtin:chaos
//	    settings:
//	      rate: 10
//	      fail.on: read
//	      fail.after: 50
//	      fail.count: 3
//
// A fatal error on the 100th record: records 1-99 are written, writing
// record 100 fails with 422 (fatal) and the pipeline is degraded. fail.count
// 1 lets it run on when someone starts it again.
//
//	connectors:
//	  - id: picky-destination
//	    type: destination
//	    plugin: builtin:chaos
//	    settings:
//	      path: ./chaos.out
//	      fail.on: write
//	      fail.after: 99
//	      fail.count: 1
//	      fail.code: 422
//
// A destination down for 30s: after 1000 records every write fails with
// a 503 in wire JSON, until 30s after the first failure; the pipeline
// keeps restarting (1s, 2s, 4s, ...) and recovers on the first attempt after
// that.
//
//	connectors:
//	  - id: outage-destination
//	    type: destination
//	    plugin: builtin:chaos
//	    settings:
//	      fail.on: write
//	      fail.after: 1000
//	      fail.duration: 30s
//	      fail.format: json
//
// Each connector logs its failure plan when it opens, so a chaos connector
// left in a pipeline by mistake shows up in the log.
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
