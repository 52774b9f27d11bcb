package schemaregistry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/conduitio/conduit-commons/database/inmemory"
	conduitsr "github.com/conduitio/conduit-schema-registry"

	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// confluentServer is a registry speaking Confluent's HTTP API on loopback
// that wants the given Authorization header.
func confluentServer(t *testing.T, authorization string) *httptest.Server {
	t.Helper()
	reg, err := conduitsr.NewSchemaRegistry(&inmemory.DB{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	conduitsr.NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)), reg).RegisterHandlers(mux)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != authorization {
			http.Error(w, `{"error_code":401,"message":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenConfluent(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, header string
		auth         func(*config.Config)
	}{
		{name: "no auth", auth: func(*config.Config) {}},
		{name: "basic", header: "Basic dXNlcjpwYXNz", auth: func(c *config.Config) {
			c.SchemaRegistry.Confluent.Auth.Type = config.SchemaRegistryAuthBasic
			c.SchemaRegistry.Confluent.Auth.Basic.Username, c.SchemaRegistry.Confluent.Auth.Basic.Password = "user", "pass"
		}},
		{name: "bearer", header: "Bearer s3cret", auth: func(c *config.Config) {
			c.SchemaRegistry.Confluent.Auth.Type = config.SchemaRegistryAuthBearer
			c.SchemaRegistry.Confluent.Auth.Bearer.Token = "s3cret"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := confluentServer(t, c.header)
			cfg := config.Default()
			cfg.SchemaRegistry.Type = config.SchemaRegistryConfluent
			cfg.SchemaRegistry.Confluent.ConnectionString = srv.URL
			c.auth(&cfg)
			reg, err := Open(cfg, store.NewInMemory())
			if err != nil {
				t.Fatal(err)
			}
			ss, err := reg.CreateSchema(ctx, "orders-value", avroSchema(userSchema))
			if err != nil {
				t.Fatal(err)
			}
			s, err := reg.SchemaByID(ctx, ss.ID)
			if err != nil || s.Schema != userSchema {
				t.Fatalf("schema %d from the registry: %+v %v", ss.ID, s, err)
			}
		})
	}

	t.Run("wrong credentials", func(t *testing.T) {
		srv := confluentServer(t, "Bearer right")
		cfg := config.Default()
		cfg.SchemaRegistry.Type = config.SchemaRegistryConfluent
		cfg.SchemaRegistry.Confluent.ConnectionString = srv.URL
		cfg.SchemaRegistry.Confluent.Auth.Type = config.SchemaRegistryAuthBearer
		cfg.SchemaRegistry.Confluent.Auth.Bearer.Token = "wrong"
		reg, err := Open(cfg, store.NewInMemory())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.CreateSchema(ctx, "orders-value", avroSchema(userSchema)); err == nil || !strings.Contains(err.Error(), "unauthorized") {
			t.Fatalf("error %v, want the registry's unauthorized", err)
		}
	})
}

func TestOpenBuiltinIsTheDefault(t *testing.T) {
	reg, err := Open(config.Default(), store.NewInMemory())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.(*Builtin); !ok {
		t.Fatalf("default registry %T, want *Builtin", reg)
	}
}
