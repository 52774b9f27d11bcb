// Package reconciler decides how the set of running pipelines changes to
// match the desired one: the pipelines of the files under pipelines.path
// and those created through the API. Plan is pure (a table of what runs and
// what is wanted in, the changes out); Apply carries a plan out on a
// Target - the runtime's pipelines - one change after the other, and says
// which entries are invalid.
package reconciler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/conduitry/conduit/pkg/config"
)

// Origin says where a pipeline's desired state comes from.
type Origin struct {
	// File is the pipeline file and Line the line of its `- id:` entry;
	// File is empty for a pipeline created through the API.
	File string
	Line int
	// Definition is the pipeline as written, credentials masked
	// (config.Pipeline's Definition).
	Definition string
}

// API reports whether the pipeline was created through the API.
func (o Origin) API() bool { return o.File == "" }

func (o Origin) String() string {
	if o.API() {
		return "api"
	}
	return o.File + ":" + strconv.Itoa(o.Line)
}

// Desired is a valid pipeline as it should run.
type Desired struct {
	Pipeline config.Pipeline
	Origin   Origin
}

// Problem is what kept an entry from being a valid pipeline.
type Problem struct {
	// PipelineID is the id of the entry, "" when the problem names none
	// (a file that cannot be read or parsed).
	PipelineID string
	File       string
	Line       int
	Err        error
	// Duplicate is a valid definition set aside because another
	// definition of its id wins; Make keeps it instead when the pipeline
	// runs from it.
	Duplicate *Desired
}

func (p Problem) Error() string { return p.Err.Error() }

// Running is a pipeline the runtime runs now.
type Running struct {
	Pipeline    config.Pipeline
	Origin      Origin
	Fingerprint string
}

// Action is what a change does to one pipeline.
type Action int

const (
	Unchanged Action = iota
	Create
	Update
	Delete
	// Invalid: the desired entry is not a valid pipeline. Kept says
	// whether a running version stays as it was.
	Invalid
)

func (a Action) String() string {
	switch a {
	case Create:
		return "create"
	case Update:
		return "update"
	case Delete:
		return "delete"
	case Invalid:
		return "invalid"
	default:
		return "unchanged"
	}
}

// Change is the plan for one pipeline id.
type Change struct {
	Action Action
	ID     string
	// Desired is the pipeline as it will run (create, update, unchanged
	// with a desired entry).
	Desired *Desired
	// Before is the running pipeline (update, delete, unchanged, invalid
	// with Kept).
	Before *Running
	// Fingerprint is Desired's.
	Fingerprint string
	// Fields are the fields an update changes, named as in a file.
	Fields []string
	// Problems are why an entry is invalid, or, for a pipeline kept as it
	// runs, why it could not be read again.
	Problems []Problem
	// Kept: the running version stays although its entry is invalid or
	// its file could not be read.
	Kept bool
}

// Plan is every change, deletes first, then updates, creates, invalid and
// unchanged entries, each group by id; and the problems that name no
// pipeline.
type Plan struct {
	Changes  []Change
	Problems []Problem
}

// Count returns how many changes have action a.
func (p Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Make computes the plan that turns running into desired. problems are the
// entries that did not load. A problem naming no pipeline (an unreadable
// file, a missing directory) protects the running pipelines of that file
// or directory that are not desired any more: which of them were deleted
// cannot be told, so none is.
func Make(running []Running, desired []Desired, problems []Problem) (Plan, error) {
	var plan Plan
	runningByID := make(map[string]*Running, len(running))
	for i := range running {
		runningByID[running[i].Pipeline.ID] = &running[i]
	}
	desired, problems = keepWhatRuns(runningByID, desired, problems)
	// The first definition of an id wins, as LoadPipelines does within
	// the files; a second (a file and the API) is a problem of its own.
	desiredByID := make(map[string]*Desired, len(desired))
	for i := range desired {
		d := &desired[i]
		if first, dup := desiredByID[d.Pipeline.ID]; dup {
			problems = append(problems, duplicate(*d, first.Origin.String()+" (that definition is used)"))
			continue
		}
		desiredByID[d.Pipeline.ID] = d
	}
	problemsByID := map[string][]Problem{}
	for _, p := range problems {
		if p.PipelineID == "" {
			plan.Problems = append(plan.Problems, p)
			continue
		}
		problemsByID[p.PipelineID] = append(problemsByID[p.PipelineID], p)
	}

	for id, d := range desiredByID {
		fp, err := Fingerprint(d.Pipeline)
		if err != nil {
			return Plan{}, err
		}
		c := Change{ID: id, Desired: d, Fingerprint: fp, Problems: problemsByID[id]}
		r := runningByID[id]
		switch {
		case r == nil:
			c.Action = Create
		case r.Fingerprint == fp:
			c.Action, c.Before = Unchanged, r
		default:
			fields, err := Diff(r.Pipeline, d.Pipeline)
			if err != nil {
				return Plan{}, err
			}
			c.Action, c.Before, c.Fields = Update, r, fields
		}
		plan.Changes = append(plan.Changes, c)
	}
	for id, ps := range problemsByID {
		if desiredByID[id] != nil {
			continue // a duplicate of a valid definition: reported with it
		}
		c := Change{Action: Invalid, ID: id, Problems: ps}
		if r := runningByID[id]; r != nil {
			c.Before, c.Kept = r, true
		}
		plan.Changes = append(plan.Changes, c)
	}
	for id, r := range runningByID {
		if desiredByID[id] != nil || problemsByID[id] != nil {
			continue
		}
		if p, ok := protectedBy(r.Origin, plan.Problems); ok {
			plan.Changes = append(plan.Changes, Change{Action: Unchanged, ID: id, Before: r, Kept: true, Problems: []Problem{p}})
			continue
		}
		plan.Changes = append(plan.Changes, Change{Action: Delete, ID: id, Before: r})
	}
	sortChanges(plan.Changes)
	return plan, nil
}

// sortChanges puts changes in a plan's order: deletes first, then updates,
// creates, invalid and unchanged entries, each group by id.
func sortChanges(changes []Change) {
	order := map[Action]int{Delete: 0, Update: 1, Create: 2, Invalid: 3, Unchanged: 4}
	slices.SortFunc(changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(order[a.Action], order[b.Action]), strings.Compare(a.ID, b.ID))
	})
}

// keepWhatRuns makes the definition a pipeline runs from win over every
// other definition of its id: a file added with the id of a running
// pipeline must not take it over, whatever the order of the file names.
// The running definition is the one from the same file (or, for a pipeline
// created through the API, the API's), valid or not: a valid one replaces
// the others (and its changes apply), an invalid one leaves the pipeline
// running as it was, and every other definition of the id is a duplicate.
// When the id's file defines it no longer (it moved to another file), or
// nothing runs under the id (a cold start), the first definition in path
// order wins, files before the API, as LoadPipelines decides.
func keepWhatRuns(running map[string]*Running, desired []Desired, problems []Problem) ([]Desired, []Problem) {
	// Where each running id is defined by the file it runs from: a valid
	// entry (in desired, or set aside by LoadPipelines as a duplicate of an
	// earlier one) or an invalid one.
	type home struct {
		valid   *Desired
		invalid bool
	}
	homes := map[string]*home{}
	at := func(id string) *home {
		if homes[id] == nil {
			homes[id] = &home{}
		}
		return homes[id]
	}
	for i := range desired {
		d := &desired[i]
		if r := running[d.Pipeline.ID]; r != nil && sameSource(r.Origin, d.Origin) && at(d.Pipeline.ID).valid == nil {
			at(d.Pipeline.ID).valid = d
		}
	}
	for i := range problems {
		p := &problems[i]
		r := running[p.PipelineID]
		if p.PipelineID == "" || r == nil || r.Origin.API() || p.File != r.Origin.File {
			continue
		}
		if p.Duplicate != nil {
			if h := at(p.PipelineID); h.valid == nil {
				h.valid = p.Duplicate
			}
		} else {
			at(p.PipelineID).invalid = true
		}
	}
	if len(homes) == 0 {
		return desired, problems
	}
	// where names the definition that is used, for the others' errors.
	where := func(id string) string {
		if h := homes[id]; h.valid != nil {
			return h.valid.Origin.String() + ", which runs it (that definition is used, this one is not)"
		}
		return running[id].Origin.File + ", which runs it (invalid there now: the running version stays; this one is not used)"
	}
	var keptDesired []Desired
	for i := range desired {
		d := &desired[i]
		h := homes[d.Pipeline.ID]
		if h == nil || h.valid == d {
			keptDesired = append(keptDesired, *d)
			continue
		}
		problems = append(problems, duplicate(*d, where(d.Pipeline.ID)))
	}
	keptProblems := problems[:0:0]
	for _, p := range problems {
		h := homes[p.PipelineID]
		switch {
		case h == nil || p.Duplicate == nil:
			keptProblems = append(keptProblems, p)
		case h.valid == p.Duplicate:
			keptDesired = append(keptDesired, *p.Duplicate) // the running definition, set aside by path order
		default:
			keptProblems = append(keptProblems, duplicate(*p.Duplicate, where(p.PipelineID)))
		}
	}
	return keptDesired, keptProblems
}

// PreferLastRun is keepWhatRuns for a start, when nothing runs yet: of
// the definitions of an id, the one whose fingerprint is lastRun's (the
// configuration the id ran with before the process stopped) wins over the
// first in path order, so that a duplicate left in place does not take the
// pipeline over at the next start. Ids lastRun knows nothing of keep the
// first definition.
func PreferLastRun(desired []Desired, problems []Problem, lastRun func(id string) (fingerprint string, ok bool)) ([]Desired, []Problem) {
	// An id of a file and of the API: the one it ran with goes first (Make
	// keeps the first).
	first := map[string]int{}
	for i := range desired {
		id := desired[i].Pipeline.ID
		j, seen := first[id]
		if !seen {
			first[id] = i
			continue
		}
		last, ok := lastRun(id)
		if !ok {
			continue
		}
		fp, err := Fingerprint(desired[i].Pipeline)
		if err != nil || fp != last {
			continue
		}
		if cur, err := Fingerprint(desired[j].Pipeline); err == nil && cur != last {
			desired[i], desired[j] = desired[j], desired[i]
		}
	}
	for i := range problems {
		p := &problems[i]
		if p.Duplicate == nil {
			continue
		}
		id := p.PipelineID
		last, ok := lastRun(id)
		if !ok {
			continue
		}
		j := slices.IndexFunc(desired, func(d Desired) bool { return d.Pipeline.ID == id })
		if j < 0 {
			continue
		}
		fp, err := Fingerprint(p.Duplicate.Pipeline)
		if err != nil || fp != last {
			continue
		}
		if cur, err := Fingerprint(desired[j].Pipeline); err == nil && cur == last {
			continue // the first one is the same configuration: nothing to choose
		}
		winner, loser := *p.Duplicate, desired[j]
		desired[j] = winner
		*p = duplicate(loser, winner.Origin.String()+", which it ran with last (that definition is used, this one is not)")
		// Other duplicates of the id named the first definition.
		for k := range problems {
			if q := &problems[k]; k != i && q.Duplicate != nil && q.PipelineID == id {
				*q = duplicate(*q.Duplicate, winner.Origin.String()+", which it ran with last (that definition is used, this one is not)")
			}
		}
	}
	return desired, problems
}

// sameSource reports whether two definitions come from the same place: the
// same file, or both from the API.
func sameSource(a, b Origin) bool {
	return a.API() == b.API() && a.File == b.File
}

// duplicate is the problem of a definition of an id that another
// definition wins; used names that one.
func duplicate(d Desired, used string) Problem {
	err := fmt.Errorf("duplicate pipeline id, already defined at %s", used)
	var e error = d.Pipeline.FieldError("id", err)
	if d.Origin.API() {
		e = fmt.Errorf("pipeline %s: id already defined at %s", d.Pipeline.ID, used)
	}
	return Problem{PipelineID: d.Pipeline.ID, File: d.Origin.File, Line: d.Origin.Line, Err: e, Duplicate: &d}
}

// protectedBy returns the problem of the file or directory that origin is
// in, if one could not be read.
func protectedBy(origin Origin, problems []Problem) (Problem, bool) {
	if origin.API() {
		return Problem{}, false
	}
	for _, p := range problems {
		// inFiles cleans both: the loader names files under the path
		// cleaned (pipelines/p.yml) and the directory as configured
		// (./pipelines).
		if inFiles(origin.File, p.File) {
			return p, true
		}
	}
	return Problem{}, false
}

// FromFiles turns what config.LoadPipelines returned into desired
// pipelines and problems.
func FromFiles(loaded []config.Pipeline, errs []error) ([]Desired, []Problem) {
	desired := make([]Desired, len(loaded))
	for i, p := range loaded {
		desired[i] = Desired{Pipeline: p, Origin: Origin{File: p.File, Line: p.Line, Definition: p.Definition}}
	}
	problems := make([]Problem, 0, len(errs))
	for _, err := range errs {
		pr := Problem{Err: err}
		var pe *config.PipelineError
		if errors.As(err, &pe) {
			pr.PipelineID, pr.File, pr.Line = pe.PipelineID, pe.File, pe.Line
		}
		var dup *config.DuplicateIDError
		if errors.As(err, &dup) {
			p := dup.Pipeline
			pr.Duplicate = &Desired{Pipeline: p, Origin: Origin{File: p.File, Line: p.Line, Definition: p.Definition}}
		}
		problems = append(problems, pr)
	}
	return desired, problems
}
