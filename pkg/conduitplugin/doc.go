// Package conduitplugin runs connectors written with Conduit's connector SDK
// inside the engine, through the plugin interfaces of Conduit's connector
// protocol (pconnector.SourcePlugin and pconnector.DestinationPlugin).
//
// The same adapter serves both ways such a connector arrives: compiled in
// (builtin:postgres, builtin:kafka, builtin:s3, wrapped by
// InProcessSDKSource / InProcessSDKDestination)
// and as a standalone executable speaking the protocol over gRPC (the
// plugin clients of the protocol module, which pkg/connector attaches to a
// process it started).
//
// How the protocol maps onto the engine:
//
//	Configure, lifecycle event, Open  Open (settings checked before, by
//	                                   ValidateSettings, when the pipeline
//	                                   file is loaded)
//	Run stream, records                Read: each message is one or more
//	                                   engine batches, records converted
//	                                   without copying their fields
//	Run stream, ack positions          Ack, in read order
//	Run stream, records / acks         Write: one message per engine batch,
//	                                   then its acks, in order
//	Stop, Teardown                     Teardown
//
// The lifecycle events follow the settings the runtime keeps for the
// connector (connector.State): the first run sends LifecycleOnCreated, a
// run with changed settings LifecycleOnUpdated with both versions.
//
// Errors: a connector of Conduit's SDK returns plain errors. Settings it
// refuses at Configure are fatal (the same settings fail again); every
// other error is transient unless a recovery rule says otherwise. An error
// acked for a record names that record (cerrors.ForRecord), so a
// dead-letter rule can take it. A compiled-in connector's method that
// panics returns the panic as its error instead of ending the process.
package conduitplugin
