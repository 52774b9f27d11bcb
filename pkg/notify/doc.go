// Package notify tells people what happened to their pipelines (DESIGN 14):
// it turns chosen audit events - a pipeline degraded, recovering for long,
// flapping, a dependency breaker opened or closed, records dead-lettered,
// a pipeline recovered - into messages to webhooks (a generic JSON body,
// Slack's incoming webhooks, PagerDuty's Events API v2).
//
// # Delivery
//
// A notification is an entry in the outbox, a range of the store. The
// entry of an audit event is committed in the same write as the event
// (auditlog.Options.With), through the one write path (store.Batcher), so
// an event that is durable has its notification durable too; a crash
// loses neither. The Notifier's goroutine (Run) waits group-window after
// the first new entry, reads the outbox, sends one message per target and
// kind - a storm of ten thousand pipelines degrading is one message with
// the count and the first max-listed pipelines - and deletes the entries a
// target took. A target that fails is retried on a backoff (1s doubling up
// to retry-max-delay, or what a 429's Retry-After says); its entries wait
// in the store, also across restarts. Delivery is therefore at least once:
// a crash between a target's answer and the delete sends that message
// again. Every delivery and failed delivery is an audit event (notified,
// notification-failed) of each pipeline the message covers.
//
// # Outbox format
//
// One entry per notification and target, under
//
//	store.PrefixNotifyOutbox + <target> + "/" + <time, 16 hex digits of Unix ns>
//	    + "/" + <pipeline or dependency> + "/" + <16 hex digits>
//
// (each part escaped as store.KeyPart), so that a target's entries sort by
// time. The value is JSON with a "version" field (testdata/entry.golden.json).
// Changing either needs a migration.
//
// # What it is not
//
// It decides nothing about pipelines and reads no URL from an API caller:
// targets, their URLs and keys come from the operator's configuration
// only. It is not an alert manager: Prometheus rules (pkg/monitoring)
// cover thresholds over metrics.
package notify
