// Package config reads what users write: the global configuration
// (conduit.yml, environment variables, flags) and pipeline configuration
// files (Conduit's pipeline file format, versions 2.x and 1.x).
//
// It turns text into validated Go values and, when the text is wrong, into
// errors that name the file, the line and the key or field, because the
// person reading the error has the file open in an editor and nothing else.
//
// Global configuration: every key lives in one table (keys.go) with its kind,
// default, documentation and validator. Default, RegisterFlags, Load, Keys and
// the documented default file (conduit.yml, embedded as DefaultConfigFile) are
// all derived from, or tested against, that table. Precedence is
// flag > environment variable > file > default.
//
// Pipeline files: LoadPipelines checks the structure (known fields, types,
// required fields, unique ids, one source, at least one destination, DLQ and
// error-recovery values), and reports every problem of a pipeline, not
// only the first. It does not know which plugins exist or which
// settings a connector accepts; the caller has the connector registry and
// reports such problems with the same *PipelineError, built with
// Pipeline.FieldError and friends so that it points at the right line.
//
// Pipeline files name environment variables (${VAR}, expanded as Conduit
// expands them; see expand.go): LoadPipelines and ParsePipelines read the
// process's environment for them, their unexported forms take a LookupEnv.
//
// The package does not start, stop or store anything, and holds no global
// state: the environment and the working directory are passed in.
package config
