package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

type fakeChanges struct {
	applied []config.FileContent
	dryRun  bool
}

func (f *fakeChanges) Apply(_ context.Context, files []config.FileContent, dryRun, _ bool) (reconciler.Plan, error) {
	f.applied, f.dryRun = files, dryRun
	return reconciler.Plan{
		Changes: []reconciler.Change{
			{Action: reconciler.Update, ID: "orders", Fields: []string{"connectors[src].settings.rate"}},
			{Action: reconciler.Invalid, ID: "seq", Kept: true, Problems: []reconciler.Problem{
				{PipelineID: "seq", File: "api:seq.yml", Line: 3, Err: &DefinedInFileError{ID: "seq", File: "pipelines/p.yml:3"}}}},
		},
		Problems: []reconciler.Problem{{File: "api:broken.yml", Err: errors.New("api:broken.yml: invalid YAML")}},
	}, nil
}

func (f *fakeChanges) Validate(files []config.FileContent) ([]string, []ConfigError) {
	return []string{"orders"}, []ConfigError{{PipelineID: "x", File: files[0].Name, Line: 2, Err: errors.New("bad")}}
}

func (f *fakeChanges) Delete(_ context.Context, id string) error {
	switch id {
	case "orders":
		return nil
	case "seq":
		return &DefinedInFileError{ID: "seq", File: "pipelines/p.yml:3"}
	}
	return ErrPipelineNotFound
}

func TestChangesRPCs(t *testing.T) {
	ctx := context.Background()
	fc := &fakeChanges{}
	svc := NewPipelineService(testPipelines(), nil, nil).WithChanges(fc)
	resp, err := svc.ApplyPipelines(ctx, connect.NewRequest(&conduitv1.ApplyPipelinesRequest{DryRun: true,
		Files: []*conduitv1.PipelineFile{{Name: "orders.yml", Content: "version: 2.2"}, {Content: "x"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if fc.applied[0].Name != "orders.yml" || fc.applied[1].Name != "files[1]" || !fc.dryRun || resp.Msg.GetApplied() {
		t.Errorf("applied %v dry run %v, response applied %v", fc.applied, fc.dryRun, resp.Msg.GetApplied())
	}
	var got []string
	for _, c := range resp.Msg.GetChanges() {
		s := fmt.Sprintf("%s %s %v kept=%v", c.GetAction(), c.GetPipelineId(), c.GetChangedFields(), c.GetKept())
		for _, e := range c.GetErrors() {
			s += " [" + e.GetConfigFile() + " " + e.GetMessage() + "]"
		}
		got = append(got, s)
	}
	want := `PLAN_ACTION_UPDATE orders [connectors[src].settings.rate] kept=false
PLAN_ACTION_INVALID seq [] kept=true [api:seq.yml:3 pipeline "seq" is defined in pipelines/p.yml:3: change or remove it there]
PLAN_ACTION_INVALID  [] kept=false [api:broken.yml api:broken.yml: invalid YAML]`
	if strings.Join(got, "\n") != want {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}

	if _, err := svc.ApplyPipelines(ctx, connect.NewRequest(&conduitv1.ApplyPipelinesRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("apply without files: %v", err)
	}
	many := make([]*conduitv1.PipelineFile, maxApplyFiles+1)
	for i := range many {
		many[i] = &conduitv1.PipelineFile{}
	}
	if _, err := svc.ApplyPipelines(ctx, connect.NewRequest(&conduitv1.ApplyPipelinesRequest{Files: many})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("apply of %d files: %v", len(many), err)
	}

	v, err := svc.ValidatePipelines(ctx, connect.NewRequest(&conduitv1.ValidatePipelinesRequest{Files: []*conduitv1.PipelineFile{{Name: "a.yml"}}}))
	if err != nil || len(v.Msg.GetPipelineIds()) != 1 || v.Msg.GetErrors()[0].GetConfigFile() != "a.yml:2" {
		t.Errorf("validate: %v %v", v, err)
	}

	for id, code := range map[string]connect.Code{"seq": connect.CodeFailedPrecondition, "nosuch": connect.CodeNotFound, "": connect.CodeInvalidArgument} {
		if _, err := svc.DeletePipeline(ctx, connect.NewRequest(&conduitv1.DeletePipelineRequest{Id: id})); connect.CodeOf(err) != code {
			t.Errorf("delete %q: %v, want %v", id, err, code)
		}
	}
	if _, err := svc.DeletePipeline(ctx, connect.NewRequest(&conduitv1.DeletePipelineRequest{Id: "orders"})); err != nil {
		t.Errorf("delete orders: %v", err)
	}

	readOnly := NewPipelineService(testPipelines(), nil, nil)
	if _, err := readOnly.DeletePipeline(ctx, connect.NewRequest(&conduitv1.DeletePipelineRequest{Id: "orders"})); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("delete without changes: %v", err)
	}
}
