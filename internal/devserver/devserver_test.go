package devserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestArgs(t *testing.T) {
	o := Options{DBFile: ".data/temporal.db"}
	o.setDefaults()
	got := strings.Join(Args(o), " ")
	require.Equal(t, "server start-dev --ip 127.0.0.1 --port 7233 --log-level warn --ui-port 8233 --db-filename .data/temporal.db"+
		" --search-attribute AgentName=Keyword --search-attribute AgentSpec=Keyword --search-attribute AgentStatus=Keyword"+
		" --dynamic-config-value system.enableActivityEagerExecution=true --dynamic-config-value matching.useNewMatcher=true", got)

	o = Options{Port: 7533, Headless: true}
	o.setDefaults()
	got = strings.Join(Args(o), " ")
	require.Contains(t, got, "--port 7533 --log-level warn --headless --search-attribute")
	require.NotContains(t, got, "--ui-port")
	require.NotContains(t, got, "--db-filename")

	o = Options{Port: 7533, UIPort: 9533, UICodecEndpoint: "http://127.0.0.1:8081"}
	o.setDefaults()
	got = strings.Join(Args(o), " ")
	require.Contains(t, got, "--ui-port 9533 --ui-codec-endpoint http://127.0.0.1:8081")
}

func TestStartRefusesCodecEndpointWhenHeadless(t *testing.T) {
	_, err := Start(t.Context(), Options{Bin: os.Args[0], Headless: true, UICodecEndpoint: "http://127.0.0.1:8081"})
	require.ErrorContains(t, err, "needs the Web UI")
}

func TestFindBinary(t *testing.T) {
	_, err := FindBinary(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)

	dir := t.TempDir()
	bin := filepath.Join(dir, "temporal")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	got, err := FindBinary(bin)
	require.NoError(t, err)
	require.Equal(t, bin, got)
}
