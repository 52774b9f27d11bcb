//go:build unix

package connector

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestPluginEnvDropsTheRuntimesVariables(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/op",
		"CONDUIT_API_AUTH_TOKEN=s3cret",
		"CONDUIT_TEST_DATABASE_URL=postgres://u:p@db/conduit",
		"conduit_api_auth_token=lower",
		"Conduit_Log_Level=debug",
		"CONDUIT_PLUGIN_SOCKET=/tmp/someone-elses.sock", // inherited, not ours
		"CONDUIT=not a prefix",
		"MY_CONDUIT_NOTE=kept",
		"HTTPS_PROXY=http://proxy:3128",
		"EMPTY=",
		"CONDUIT_",
	}
	got := pluginEnv(environ, "/run/p/plugin.sock")
	want := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/op",
		"CONDUIT=not a prefix",
		"MY_CONDUIT_NOTE=kept",
		"HTTPS_PROXY=http://proxy:3128",
		"EMPTY=",
		"CONDUIT_PLUGIN_SOCKET=/run/p/plugin.sock",
		"CONDUIT_PLUGIN_PROTOCOL=1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pluginEnv =\n%q\nwant\n%q", got, want)
	}
}

// TestStandalonePluginDoesNotInheritTheToken asks a real plugin process
// what its environment holds.
func TestStandalonePluginDoesNotInheritTheToken(t *testing.T) {
	const token = "tok-3f9a1c77e2b84d05"
	t.Setenv("CONDUIT_API_AUTH_TOKEN", token)
	t.Setenv("conduit_db_postgres_url", "postgres://u:"+token+"@db/conduit")
	t.Setenv("PLUGIN_TEST_KEEP", "kept")
	h := newStandaloneHarness(t, StandaloneConfig{})
	dst := h.destination("testplugin", map[string]string{"env.show": "PLUGIN_TEST_KEEP,PATH,CONDUIT_API_AUTH_TOKEN"})
	if err := dst.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer dst.Teardown(context.Background())
	h.waitLog("stdout", "env end")

	for _, line := range []string{
		"env PLUGIN_TEST_KEEP=kept",
		"env PATH=" + os.Getenv("PATH"),
		"env CONDUIT_API_AUTH_TOKEN unset",
	} {
		if h.logs.FilterMessage(line).Len() != 1 {
			t.Errorf("the plugin did not print %q; log:\n%s", line, h.dump())
		}
	}
	var conduitVars []string
	for _, e := range h.logs.FilterMessageSnippet("env conduit ").All() {
		conduitVars = append(conduitVars, strings.TrimPrefix(e.Message, "env conduit "))
	}
	slices.Sort(conduitVars)
	// Its own protocol's and Conduit's connector protocol's, nothing of
	// the runtime's.
	want := []string{"CONDUIT_CONNECTOR_ID", "CONDUIT_CONNECTOR_LOG_LEVEL", "CONDUIT_CONNECTOR_MAX_RECEIVE_RECORD_SIZE",
		"CONDUIT_CONNECTOR_TOKEN", "CONDUIT_CONNECTOR_UTILITIES_GRPC_TARGET", "CONDUIT_PLUGIN_MAGIC_COOKIE",
		"CONDUIT_PLUGIN_PROTOCOL", "CONDUIT_PLUGIN_SOCKET"}
	if !reflect.DeepEqual(conduitVars, want) {
		t.Errorf("the plugin's CONDUIT_ variables are %q, want only %q", conduitVars, want)
	}
	if strings.Contains(h.dump(), token) {
		t.Errorf("the token reached the plugin; log:\n%s", h.dump())
	}
}
