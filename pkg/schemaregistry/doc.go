// Package schemaregistry is where Conduit's avro.encode and avro.decode
// processors find their schemas: the built-in registry kept in conduit's
// own store (the default), or a Confluent schema registry
// (schema-registry.type confluent), as under Conduit.
//
// It is not a schema registry server: nothing outside the process reads
// the built-in registry, so Avro that leaves conduit for consumers that
// decode it with a registry of their own should use a Confluent registry.
package schemaregistry
