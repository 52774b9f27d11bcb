package schemaregistry

import (
	"fmt"

	clog "github.com/conduitio/conduit/pkg/foundation/log"
	csr "github.com/conduitio/conduit/pkg/schemaregistry"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// Registry is what Conduit's avro processors ask of a schema registry.
type Registry = csr.Registry

// Open returns the registry cfg names: the built-in one kept in db, or a
// client of the Confluent registry at its URL (with Conduit's own client,
// which caches what it read). The client connects on first use; a
// registry that cannot be reached then fails the records that need it,
// with the registry's error.
func Open(cfg config.Config, db store.Store) (Registry, error) {
	src := cfg.SchemaRegistry
	switch src.Type {
	case config.SchemaRegistryBuiltin, "":
		return NewBuiltin(db), nil
	case config.SchemaRegistryConfluent:
		opts := []sr.ClientOpt{sr.URLs(src.Confluent.ConnectionString)}
		switch auth := src.Confluent.Auth; auth.Type {
		case config.SchemaRegistryAuthBasic:
			opts = append(opts, sr.BasicAuth(auth.Basic.Username, auth.Basic.Password))
		case config.SchemaRegistryAuthBearer:
			opts = append(opts, sr.BearerToken(auth.Bearer.Token))
		}
		c, err := csr.NewClient(clog.Nop(), opts...)
		if err != nil {
			return nil, fmt.Errorf("schema-registry.confluent: %w", err)
		}
		return c, nil
	default:
		return nil, fmt.Errorf("schema-registry.type %q: want builtin or confluent", src.Type)
	}
}
