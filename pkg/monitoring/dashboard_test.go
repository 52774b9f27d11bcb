package monitoring

import (
	"encoding/json"
	"testing"
)

// The dashboard imports as it is: a uid, panels with unique ids that fit
// Grafana's 24-column grid without overlapping, every query on the data
// source the importer picks (the datasource variable), none on a fixed one.
func TestDashboardIsImportable(t *testing.T) {
	type gridPos struct{ H, W, X, Y int }
	type source struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID         int     `json:"id"`
			Type       string  `json:"type"`
			Title      string  `json:"title"`
			GridPos    gridPos `json:"gridPos"`
			Datasource *source `json:"datasource"`
			Targets    []struct {
				Datasource *source `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(Dashboard, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q, title %q: both are needed", dash.UID, dash.Title)
	}
	if len(dash.Templating.List) == 0 || dash.Templating.List[0].Name != "datasource" || dash.Templating.List[0].Type != "datasource" {
		t.Errorf("the first variable must be the datasource the importer picks")
	}
	ids := map[int]string{}
	cells := map[[2]int]string{}
	for _, p := range dash.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		for _, q := range p.Targets {
			if q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query's datasource %+v, want the ${datasource} variable", p.Title, q.Datasource)
			}
		}
	}
}
