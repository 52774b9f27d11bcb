package config

import (
	"reflect"
	"strings"
	"testing"
)

const v2File = `version: "2.2"
pipelines:
  - id: orders
    status: stopped
    description: orders to a file
    connectors:
      - id: src
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
        processors:
          - id: tag
            type: field.set
            settings:
              field: .Metadata.src
              value: gen
      - id: out
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      - id: second
        type: field.set
        workers: 2
        settings:
          field: .Metadata.b
          value: "2"
      - id: first
        type: field.exclude
        settings:
          fields: .Metadata.x
    dead-letter-queue:
      plugin: builtin:log
      window-size: 4
      window-nack-threshold: 2
`

// The same pipeline as Conduit's version 1 writes it.
const v1File = `version: 1.1
pipelines:
  orders:
    status: stopped
    description: orders to a file
    connectors:
      src:
        type: source
        plugin: builtin:generator
        settings:
          format.type: structured
          format.options.id: int
        processors:
          tag:
            type: field.set
            settings:
              field: .Metadata.src
              value: gen
      out:
        type: destination
        plugin: builtin:file
        settings:
          path: ./out.jsonl
    processors:
      second:
        type: field.set
        workers: 2
        settings:
          field: .Metadata.b
          value: "2"
      first:
        type: field.exclude
        settings:
          fields: .Metadata.x
    dead-letter-queue:
      plugin: builtin:log
      window-size: 4
      window-nack-threshold: 2
`

// what is a pipeline without where it was written.
func what(p Pipeline) Pipeline {
	p.File, p.Line, p.lines, p.Definition = "", 0, nil, ""
	p.DLQ.Line, p.DLQ.SettingLines = 0, nil
	strip := func(prs []Processor) []Processor {
		for i := range prs {
			prs[i].Line, prs[i].SettingLines = 0, nil
		}
		return prs
	}
	for i := range p.Connectors {
		p.Connectors[i].Line, p.Connectors[i].SettingLines = 0, nil
		p.Connectors[i].Processors = strip(p.Connectors[i].Processors)
	}
	p.Processors = strip(p.Processors)
	return p
}

func TestVersion1FilesReadAsTheirVersion2Equivalent(t *testing.T) {
	for _, version := range []string{"1", "1.0", "1.1", `"1.1"`, "1.12"} {
		t.Run(version, func(t *testing.T) {
			v1 := strings.Replace(v1File, "version: 1.1", "version: "+version, 1)
			got, errs := parsePipelines(mapEnv(nil), FileContent{Name: "v1.yml", Data: []byte(v1)})
			if len(errs) > 0 || len(got) != 1 {
				t.Fatalf("version 1: %d pipelines, errors %v", len(got), errs)
			}
			want, errs := parsePipelines(mapEnv(nil), FileContent{Name: "v2.yml", Data: []byte(v2File)})
			if len(errs) > 0 || len(want) != 1 {
				t.Fatalf("version 2: %d pipelines, errors %v", len(want), errs)
			}
			if g, w := what(got[0]), what(want[0]); !reflect.DeepEqual(g, w) {
				t.Errorf("version 1 reads as\n%+v\nwant\n%+v", g, w)
			}
			// Processors keep the order they are written in.
			if ps := got[0].Processors; ps[0].ID != "second" || ps[1].ID != "first" {
				t.Errorf("processors %s, %s; want second, first", ps[0].ID, ps[1].ID)
			}
			if !strings.Contains(got[0].Definition, "- id: orders") || !strings.Contains(got[0].Definition, `version: "2.2"`) {
				t.Errorf("the definition is not the pipeline in version 2:\n%s", got[0].Definition)
			}
		})
	}
}

func TestVersion1FileErrorsNameTheirLines(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{name: "a list of pipelines", file: "version: 1.0\npipelines:\n  - id: a\n",
			want: []string{"v1.yml:3: pipelines: expected a map of pipelines by id"}},
		{name: "a field of a connector", file: "version: 1.0\npipelines:\n  p:\n    connectors:\n      src:\n        type: source\n        plugn: builtin:generator\n",
			want: []string{"v1.yml:7:", `pipeline "p"`, "connectors[src].plugn", `did you mean "plugin"?`}},
		{name: "a connector that is not a map", file: "version: 1.0\npipelines:\n  p:\n    connectors:\n      src: builtin:generator\n",
			want: []string{"v1.yml:5:", "expected a map (a connector)"}},
		{name: "version 3", file: "version: 3\npipelines: {}\n",
			want: []string{"v1.yml:1: version:", "supported: 2.x (2.0, 2.1, 2.2) and 1.x (1.0, 1.1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := parsePipelines(mapEnv(nil), FileContent{Name: "v1.yml", Data: []byte(tt.file)})
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q does not contain %q", errs[0], w)
				}
			}
		})
	}
}

func TestVersion1IdsAreKeysAndNotExpanded(t *testing.T) {
	file := strings.Replace(v1File, "  orders:", "  ${ID}:", 1)
	file = strings.Replace(file, "path: ./out.jsonl", "path: ./${ID}.jsonl", 1)
	got, errs := parsePipelines(mapEnv(map[string]string{"ID": "x"}), FileContent{Name: "v1.yml", Data: []byte(file)})
	// Not expanded: the id is "${ID}", which holds characters no pipeline
	// id may hold (as in Conduit), and is refused as written.
	if len(got) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), `"${ID}" holds '$'`) {
		t.Fatalf("%d pipelines, errors %v", len(got), errs)
	}
	file = strings.NewReplacer("${ID}:", "orders-${ID}:").Replace(strings.Replace(v1File, "path: ./out.jsonl", "path: ./${ID}.jsonl", 1))
	got, errs = parsePipelines(mapEnv(map[string]string{"ID": "x"}), FileContent{Name: "v1.yml", Data: []byte(file)})
	if len(errs) > 0 || len(got) != 1 {
		t.Fatalf("%d pipelines, errors %v", len(got), errs)
	}
	eq(t, "path", got[0].Connectors[1].Settings["path"], "./x.jsonl")
}
