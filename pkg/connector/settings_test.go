package connector

import (
	"testing"
)

type constructor struct {
	name string
	new  func(Config) error
}

var (
	generatorCtor = constructor{"generator", func(c Config) error { _, err := NewGeneratorSource(c); return err }}
	fileSrcCtor   = constructor{"file source", func(c Config) error { _, err := NewFileSource(c); return err }}
	fileDstCtor   = constructor{"file destination", func(c Config) error { _, err := NewFileDestination(c); return err }}
	logCtor       = constructor{"log", func(c Config) error { _, err := NewLogDestination(c); return err }}
)

func TestSettingErrors(t *testing.T) {
	gen := func(kv ...string) map[string]string {
		m := map[string]string{"format.options.id": "int"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	file := func(kv ...string) map[string]string {
		m := map[string]string{"path": "/tmp/f"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		ctor     constructor
		settings map[string]string
		setting  string
		want     []string
	}{
		// generator
		{"gen unknown key", generatorCtor, gen("rat", "1"), "rat", []string{"unknown setting", "rate", "recordCount"}},
		{"gen wrong case suggests", generatorCtor, gen("recordcount", "1"), "recordcount", []string{`did you mean "recordCount"?`}},
		{"gen rate not a number", generatorCtor, gen("rate", "abc"), "rate", []string{`setting "rate": "abc" is not a number`}},
		{"gen rate negative", generatorCtor, gen("rate", "-1"), "rate", []string{"0 or more"}},
		{"gen rate tiny", generatorCtor, gen("rate", "1e-12"), "rate", []string{"too small"}},
		{"gen rate NaN", generatorCtor, gen("rate", "NaN"), "rate", []string{"not a number"}},
		{"gen recordCount float", generatorCtor, gen("recordCount", "1.5"), "recordCount", []string{`"1.5" is not a whole number`}},
		{"gen recordCount negative", generatorCtor, gen("recordCount", "-2"), "recordCount", []string{"0 (unlimited) or more"}},
		{"gen readTime", generatorCtor, gen("readTime", "10"), "readTime", []string{`"10" is not a duration`}},
		{"gen readTime negative", generatorCtor, gen("readTime", "-1s"), "readTime", []string{"must not be negative"}},
		{"gen burst sleep", generatorCtor, gen("burst.sleepTime", "x"), "burst.sleepTime", []string{"not a duration"}},
		{"gen burst zero generate", generatorCtor, gen("burst.sleepTime", "1s", "burst.generateTime", "0s"), "burst.generateTime", []string{"more than 0"}},
		{"gen format type", generatorCtor, gen("format.type", "avro"), "format.type", []string{`"avro" is not a format`}},
		{"gen field type", generatorCtor, gen("format.options.name", "text"), "format.options.name", []string{`"text" is not a field type`, "int, string, bool, time or duration"}},
		{"gen empty field name", generatorCtor, gen("format.options.", "int"), "format.options.", []string{"field name is missing"}},
		{"gen no fields", generatorCtor, map[string]string{}, "format.options", []string{"at least one field"}},
		{"gen no fields raw", generatorCtor, map[string]string{"format.type": "raw"}, "format.options", []string{"format.type raw"}},
		{"gen file needs path", generatorCtor, map[string]string{"format.type": "file"}, "format.options.path", []string{"is required"}},
		{"gen file other option", generatorCtor, map[string]string{"format.type": "file", "format.options.path": "/x", "format.options.id": "int"}, "format.options.id", []string{"does not apply"}},
		{"gen operations", generatorCtor, gen("operations", "create,upsert"), "operations", []string{`unknown operation "upsert"`}},
		{"gen collections", generatorCtor, gen("collections.users.format.type", "raw"), "collections.users.format.type", []string{"collections are not supported yet"}},
		{"gen sdk batch size", generatorCtor, gen("sdk.batch.size", "ten"), "sdk.batch.size", []string{`"ten" is not a whole number`}},
		{"gen sdk batch delay", generatorCtor, gen("sdk.batch.delay", "5"), "sdk.batch.delay", []string{"not a duration"}},
		{"gen sdk schema bool", generatorCtor, gen("sdk.schema.extract.key.enabled", "maybe"), "sdk.schema.extract.key.enabled", []string{"not a boolean"}},

		// file source
		{"file src missing path", fileSrcCtor, map[string]string{}, "path", []string{"is required"}},
		{"file src empty path", fileSrcCtor, map[string]string{"path": ""}, "path", []string{"is required"}},
		{"file src unknown", fileSrcCtor, file("sync", "true"), "sync", []string{"unknown setting", "known settings: path, sdk.*"}},
		{"file src sdk batch", fileSrcCtor, file("sdk.batch.size", "-1"), "sdk.batch.size", []string{"0 or more"}},

		// file destination
		{"file dst missing path", fileDstCtor, map[string]string{"sync": "true"}, "path", []string{"is required"}},
		{"file dst sync", fileDstCtor, file("sync", "yes"), "sync", []string{`"yes" is not a boolean`}},
		{"file dst unknown", fileDstCtor, file("paht", "x"), "paht", []string{"unknown setting"}},
		{"file dst record format", fileDstCtor, file("sdk.record.format", "debezium/json"), "sdk.record.format", []string{`"debezium/json" is not supported`, "opencdc/json"}},
		{"file dst rate", fileDstCtor, file("sdk.rate.perSecond", "fast"), "sdk.rate.perSecond", []string{"not a number"}},
		{"file dst burst", fileDstCtor, file("sdk.rate.burst", "1.5"), "sdk.rate.burst", []string{"not a whole number"}},

		// log
		{"log level", logCtor, map[string]string{"level": "loud"}, "level", []string{`"loud" is not a log level`}},
		{"log unknown", logCtor, map[string]string{"format": "json"}, "format", []string{"unknown setting", "level, message, sdk.*"}},
		{"log record format", logCtor, map[string]string{"sdk.record.format": "template"}, "sdk.record.format", []string{"not supported"}},
	}
	for _, tt := range tests {
		t.Run(tt.ctor.name+"/"+tt.name, func(t *testing.T) {
			err := tt.ctor.new(Config{ConnectorID: "c", Settings: tt.settings})
			wantSettingError(t, err, tt.setting, tt.want...)
		})
	}
}

func TestSettingsAccepted(t *testing.T) {
	tests := []struct {
		name     string
		ctor     constructor
		settings map[string]string
	}{
		{"gen conduit example", generatorCtor, map[string]string{
			"format.type": "structured", "format.options.id": "int", "format.options.name": "string",
			"format.options.admin": "bool", "format.options.at": "time", "format.options.took": "Duration",
			"operations": "create, update,delete,snapshot", "rate": "1000.5", "recordCount": "-1",
			"readTime": "10ms", "burst.generateTime": "2s", "burst.sleepTime": "1s",
			"sdk.batch.size": "100", "sdk.batch.delay": "1s", "sdk.schema.extract.type": "avro",
			"sdk.schema.extract.payload.enabled": "false", "sdk.schema.context.name": "x",
		}},
		{"gen raw", generatorCtor, map[string]string{"format.type": "raw", "format.options.id": "int"}},
		{"gen file", generatorCtor, map[string]string{"format.type": "file", "format.options.path": "/does/not/matter/yet"}},
		{"gen empty values mean default", generatorCtor, map[string]string{"format.options.id": "int", "rate": "", "recordCount": " "}},
		{"file src", fileSrcCtor, map[string]string{"path": "/nonexistent/is/fine/until/open", "sdk.batch.size": "10"}},
		{"file dst", fileDstCtor, map[string]string{"path": "out.jsonl", "sync": "true",
			"sdk.record.format": "opencdc/json", "sdk.record.format.options": "", "sdk.batch.size": "1000",
			"sdk.batch.delay": "100ms", "sdk.rate.perSecond": "10", "sdk.rate.burst": "5", "sdk.some.future.key": "x"}},
		{"log defaults", logCtor, nil},
		{"log conduit", logCtor, map[string]string{"level": "TRACE", "message": "got one", "sdk.batch.size": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.ctor.name+"/"+tt.name, func(t *testing.T) {
			if err := tt.ctor.new(Config{ConnectorID: "c", Settings: tt.settings}); err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
		})
	}
}
