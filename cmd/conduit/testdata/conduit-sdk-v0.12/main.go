// Command connector is a destination built with Conduit's connector SDK
// v0.12, which (like every SDK before v0.13) has no `specs` command: the
// runtime finds it by its specification's name only by asking over
// Conduit's protocol. It writes one line per record, the record's key, to
// the file of its setting "path".
package main

import (
	"context"
	"os"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-commons/opencdc"
	sdk "github.com/conduitio/conduit-connector-sdk"
)

type destination struct {
	sdk.UnimplementedDestination
	path string
	f    *os.File
}

func (d *destination) Parameters() config.Parameters {
	return config.Parameters{"path": {Type: config.ParameterTypeString}}
}

func (d *destination) Configure(_ context.Context, cfg config.Config) error {
	d.path = cfg["path"]
	return nil
}

func (d *destination) Open(context.Context) (err error) {
	d.f, err = os.OpenFile(d.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	return err
}

func (d *destination) Write(_ context.Context, rs []opencdc.Record) (int, error) {
	for i, r := range rs {
		if _, err := d.f.Write(append(r.Key.Bytes(), '\n')); err != nil {
			return i, err
		}
	}
	return len(rs), nil
}

func (d *destination) Teardown(context.Context) error {
	if d.f != nil {
		return d.f.Close()
	}
	return nil
}

func main() {
	sdk.Serve(sdk.Connector{
		NewSpecification: func() sdk.Specification {
			return sdk.Specification{Name: "sdk012", Summary: "test destination", Version: "v1.2.3", Author: "conduit tests"}
		},
		NewDestination: func() sdk.Destination { return &destination{} },
	})
}
