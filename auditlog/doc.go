// Package auditlog is the append-only log of what happened to each pipeline
// (DESIGN 7): the supervisor appends an Event for every transition, fault,
// scheduled restart and dedup hit, and users read them back by range (List)
// or follow them live (Watch) through the API and the CLI.
//
// Each pipeline has its own log, ordered by a sequence number that starts at
// 1 and grows by one per event, also across process restarts. Append returns
// once the event is durable (synced to disk through the store's one writer,
// store.Batcher, so concurrent appends share one sync); Record does not
// wait, and commits the event together with other writes the caller gives
// it (the pipeline state the event records).
//
// # On-disk format
//
// One store entry per event, under the key
//
//	store.PrefixAuditLog + <pipeline id> + "/" + <sequence as 16 lowercase hex digits>
//
// for example "conduit/auditlog/orders-to-s3/000000000000002a", so that a
// pipeline's keys sort by sequence and the newest is found with one reverse
// seek. In the pipeline id, '%' and '/' are written as "%25" and "%2F" (ids
// without them appear as they are), so no pipeline's key range can contain
// another's. The value is the event as a JSON object with a "version" field
// (see testdata/event.golden.json). Changing either needs a migration.
//
// Entries that do not parse (a foreign key under the prefix, a corrupt or
// newer-version value) are skipped with a log line naming the key.
//
// # Retention
//
// A pipeline keeps at most Options.MaxEventsPerPipeline events (the oldest
// go first, deleted in batches) and, with Options.MaxAge set, none older
// than that, except that the newest event of a pipeline is always kept: its
// sequence is what lets the numbering continue after a restart. When
// several processes share the store, each trims only the pipelines it runs
// (Options.Owns).
//
// # Several processes, one store
//
// A Log knows the events it appended and those stored when it opened. When
// another process appends to a pipeline (it runs the pipeline, or ran it
// before this one took it over), Sync takes those events up: it publishes
// them to this Log's watchers and continues the numbering after them.
//
// # What it is not
//
// It is not a metrics store or a debug log: events are rare (a handful per
// pipeline state change) and each costs a synced write. It does not decide
// anything; lifecycle/ decides and reports here.
package auditlog
