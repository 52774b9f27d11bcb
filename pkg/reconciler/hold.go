package reconciler

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// DeletionHeldError is the problem of pipeline files that suddenly define
// no pipeline at all while pipelines of theirs run: an emptied directory,
// a deploy whose link points at an empty or missing release. Deleting
// every pipeline (their state and dedup entries) because of it would be
// silent and beyond repair, so the deletion is held (HoldMassDeletion)
// until the files define pipelines again or pipelines.allow-delete-all
// says it is meant.
type DeletionHeldError struct {
	// Path is pipelines.path.
	Path string
	// IDs are the pipelines that are not deleted.
	IDs []string
	// Stored says that the pipelines do not run (a start): their state
	// is what is kept.
	Stored bool
}

// maxHeldListed bounds the ids an error lists.
const maxHeldListed = 10

// Error implements error.
func (e *DeletionHeldError) Error() string {
	ids := e.IDs
	more := ""
	if len(ids) > maxHeldListed {
		ids, more = ids[:maxHeldListed], fmt.Sprintf(" and %d more", len(e.IDs)-maxHeldListed)
	}
	kept := "they keep running"
	if e.Stored {
		kept = "their state is kept"
	}
	return fmt.Sprintf("the pipeline files under %s (pipelines.path) define no pipeline any more, where they defined %d (%s%s): "+
		"deleting all of them at once is held and %s; restore the files (or the release the link points to), "+
		"or set pipelines.allow-delete-all: true to delete them",
		e.Path, len(e.IDs), strings.Join(ids, ", "), more, kept)
}

// HoldMassDeletion holds the deletions of plan when the pipeline files
// under root define nothing any more - no valid entry, no invalid one, no
// file that failed to read - while pipelines of those files run: each such
// pipeline stays as it runs (Unchanged, Kept, with the problem), and the
// problem, a *DeletionHeldError, is one of the plan's problems, so Apply
// lists it once. Deleting some of the files (others still define
// pipelines) deletes their pipelines as always; so does a plan whose
// files define nothing and run nothing.
func HoldMassDeletion(plan Plan, root string) Plan {
	if root == "" {
		return plan
	}
	for _, p := range plan.Problems {
		if inFiles(p.File, root) {
			return plan // a file that cannot be read already keeps its pipelines
		}
	}
	var deleted []int
	for i, c := range plan.Changes {
		if c.Desired != nil && inFiles(c.Desired.Origin.File, root) {
			return plan
		}
		if slices.ContainsFunc(c.Problems, func(p Problem) bool { return inFiles(p.File, root) }) {
			return plan
		}
		if c.Action == Delete && c.Before != nil && inFiles(c.Before.Origin.File, root) {
			deleted = append(deleted, i)
		}
	}
	if len(deleted) == 0 {
		return plan
	}
	held := &DeletionHeldError{Path: root}
	for _, i := range deleted {
		held.IDs = append(held.IDs, plan.Changes[i].ID)
	}
	problem := Problem{File: root, Err: held}
	out := Plan{Changes: slices.Clone(plan.Changes), Problems: append(slices.Clone(plan.Problems), problem)}
	for _, i := range deleted {
		c := &out.Changes[i]
		c.Action, c.Kept, c.Problems = Unchanged, true, []Problem{problem}
	}
	sortChanges(out.Changes)
	return out
}

// inFiles reports whether file is root or lies under it (a pipeline file
// of pipelines.path); "" (the API) never is.
func inFiles(file, root string) bool {
	if file == "" {
		return false
	}
	file, root = filepath.Clean(file), filepath.Clean(root)
	return file == root || strings.HasPrefix(file, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}
