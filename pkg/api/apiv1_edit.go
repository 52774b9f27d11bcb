package api

import (
	"context"
	"errors"
)

// Conduit's API v1 changes a pipeline piece by piece (a connector's
// settings, a processor added); this product changes a pipeline as a
// whole, from its pipeline file. For a pipeline applied through the API,
// whose file the runtime keeps, a piece is changed by changing that file
// and applying it again, so the change is checked, planned and audited as
// any apply. A file's pipeline is changed in its file.

// EditOp is a change Conduit's API v1 makes to one piece of a pipeline.
type EditOp int

// The changes of Conduit's API v1 an applied pipeline takes.
const (
	EditCreateConnector EditOp = iota + 1
	EditUpdateConnector
	EditDeleteConnector
	EditCreateProcessor
	EditUpdateProcessor
	EditDeleteProcessor
	EditUpdatePipeline
)

// PipelineEdit is one change to a pipeline, in the pipeline file's terms.
type PipelineEdit struct {
	Op EditOp
	// Connector is the connector's id in the pipeline, and the parent of
	// a connector's processor; Processor the processor's id.
	Connector, Processor string
	// Source says a created connector is a source (else a destination).
	Source bool
	// Plugin, Settings, Condition and Workers are the new connector's or
	// processor's; an empty Plugin keeps the one it has.
	Plugin    string
	Settings  map[string]string
	Condition string
	Workers   int
	// Name is a connector's or the pipeline's; Description the
	// pipeline's.
	Name, Description string
}

// PipelineEditor is the optional ability of a ConduitV1 runtime to change
// an applied pipeline piece by piece. EditPipeline returns a
// *DefinedInFileError for a pipeline a file under pipelines.path defines,
// and an *EditError when the changed pipeline is not valid.
type PipelineEditor interface {
	EditPipeline(ctx context.Context, pipelineID string, e PipelineEdit) error
}

// EditError is a change that would make the pipeline invalid; nothing
// changed.
type EditError struct{ Err error }

func (e *EditError) Error() string { return e.Err.Error() }
func (e *EditError) Unwrap() error { return e.Err }

// ErrNotEditable refuses a piece-by-piece change to a pipeline whose file
// conduit cannot change that way (not version 2, say).
var ErrNotEditable = errors.New("this pipeline's file cannot be changed piece by piece")
