// Package pipeline is the engine that moves records from a pipeline's
// sources through to every destination and acknowledges them back to the
// source each came from.
//
// One run of a pipeline is an Engine. Its stages are goroutines joined by
// bounded channels, and what travels between them is a batch, never a single
// record:
//
//	           free batches (bounded pool: backpressure and a memory bound)
//	   ┌──────────────────────────────────────────────────────────────┐
//	   v                                                              │
//	reader ──> [processors] ──┬──> destination 1 ──┐                  │
//	(source.Read)             ├──> destination 2 ──┼──> acker ──> back to pool
//	reader 2 ─┘               └──> inflight (read order) ──┘   │
//	(another source)                                           v
//	                                                 persister (position),
//	                                                 one per source
//
// A pipeline of several sources has a reader per source; a batch holds the
// records of one source, and their batches meet in one order before the
// processors, which run a source's own processors on its records and the
// pipeline's on all. Each source keeps its own position and persister; a
// source that fails ends the run (the pipeline is one unit).
//
// Invariants:
//   - Acknowledgements reach each source in its read order: every stage
//     handles batches first-in first-out and the acker walks the inflight
//     queue in the order the readers produced it.
//   - A batch is acknowledged only after every destination wrote it.
//   - A processor may turn one record into several (split, clone; a
//     processor.Splitter), be it a source's own, the pipeline's or a
//     destination's. Each derived record gets a position of its own,
//     its original's and its index (record.DerivedPosition), which dedup,
//     the dead-letter queue and destinations see as any position of its
//     source; it goes through the processors after the split alone (one
//     rejected goes to the dead-letter queue alone, one filtered is
//     dropped alone). The original is acknowledged to its source, with
//     that source's own position, when the last record derived from it is
//     done, still in that source's read order.
//   - The position the source resumes from is persisted only after the
//     source acknowledgement returned. It is handed to the store's one
//     writer (store.Batcher) without waiting: while a commit is under way,
//     later positions replace it in the next one, so a busy pipeline does
//     one durable write per commit, not one per batch.
//   - With dedup, a destination never writes a batch while the batch before
//     is written and not yet remembered (dedup/).
//   - With a WriteGuard, every Write call to a destination (the dead-letter
//     queue included) comes right after the guard allowed it; a refusal
//     ends the run. Write's context carries the guard too, for a
//     destination to check again right before its records become visible
//     (pkg/writeguard; the file destination and the plugins' do).
//   - Stop is graceful: the reader stops reading, in-flight batches drain,
//     are acknowledged and the last position is persisted, and Run returns
//     nil. Cancelling Run's context is a force stop: every stage returns at
//     once and in-flight records are dropped (they are re-read after the
//     next start, because their positions were never persisted).
//
// The engine does not retry. A run ends with nil (graceful stop) or an error
// naming the stage; deciding what to do about it is the supervisor's job.
package pipeline
