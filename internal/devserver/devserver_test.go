package devserver

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// fakeServer is a "temporal" that counts its starts in a file and exits at
// once with output, as a server that failed to start does.
func fakeServer(t *testing.T, output string) (bin, starts string) {
	t.Helper()
	dir := t.TempDir()
	starts = filepath.Join(dir, "starts")
	bin = filepath.Join(dir, "temporal")
	script := "#!/bin/sh\necho x >>" + starts + "\necho 'starting'\necho '" + output + "' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, starts
}

func startCount(t *testing.T, starts string) int {
	t.Helper()
	b, err := os.ReadFile(starts)
	require.NoError(t, err)
	return strings.Count(string(b), "x")
}

// A start that fails says why, with the server's last output, and is not
// tried again unless a port was lost to a race (the server picks its
// internal ports itself), then at most startTries times.
func TestStartFailureCarriesTheServerOutput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		starts int
	}{
		{"port race: tried again", "listen tcp 127.0.0.1:41234: bind: address already in use", startTries},
		{"other failure: once", "unable to open database file: permission denied", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, starts := fakeServer(t, tc.output)
			var stderr strings.Builder
			_, err := Start(t.Context(), Options{Bin: bin, Port: freePort(t), Headless: true, Stderr: &stderr, ReadyTimeout: 30 * time.Second})
			require.Error(t, err)
			require.Contains(t, err.Error(), "exited during start")
			require.Contains(t, err.Error(), tc.output, "the server's output is in the error")
			require.Contains(t, err.Error(), "starting", "stdout is in the error too")
			require.Equal(t, tc.starts, startCount(t, starts))
			require.Contains(t, stderr.String(), tc.output, "the caller's writer still gets the output")
		})
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	tb := &tailBuffer{max: 8}
	for _, s := range []string{"abc", "defgh", "ijklmnop", "q"} {
		n, err := tb.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	require.Equal(t, "jklmnopq", tb.String())
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
