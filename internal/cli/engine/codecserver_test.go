package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/payloadcodec"
)

// writeCodecKeys writes a codec key file (0600) and returns its path.
func writeCodecKeys(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "codec.keys")
	line := "k1 " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, payloadcodec.KeyBytes)) + "\n"
	require.NoError(t, os.WriteFile(p, []byte(line), 0o600))
	return p
}

func runAgentctl(t *testing.T, ctx context.Context, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, "test", args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, Commands())
	return code, out.String() + errb.String()
}

func TestCodecFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	keys := writeCodecKeys(t, dir)
	loose := filepath.Join(dir, "loose.keys")
	require.NoError(t, os.WriteFile(loose, []byte("k1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))+"\n"), 0o644))
	require.NoError(t, os.Chmod(loose, 0o644))
	shortKey := filepath.Join(dir, "short.keys")
	require.NoError(t, os.WriteFile(shortKey, []byte("# codec\nk1 "+base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))+"\n"), 0o600))
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("0123456789abcdef-token\n"), 0o600))

	tests := []struct {
		name string
		args []string
		env  string // AGENTFLOW_CODEC_KEY_FILE
		want string
	}{
		{name: "codec-server without keys", args: []string{"codec-server", "--insecure-no-auth"}, want: "needs --codec-key-file"},
		{name: "codec-server without an auth choice", args: []string{"--codec-key-file", keys, "codec-server"}, want: "needs --auth-token-file, or --insecure-no-auth"},
		{name: "both auth choices", args: []string{"--codec-key-file", keys, "codec-server", "--auth-token-file", tok, "--insecure-no-auth"}, want: "exclude each other"},
		{name: "no auth on every interface", args: []string{"--codec-key-file", keys, "codec-server", "--insecure-no-auth", "--listen", ":8081"}, want: "loopback address only"},
		{name: "no auth on a public address", args: []string{"--codec-key-file", keys, "codec-server", "--insecure-no-auth", "--listen", "0.0.0.0:8081"}, want: "loopback address only"},
		{name: "origin with a path", args: []string{"--codec-key-file", keys, "codec-server", "--insecure-no-auth", "--ui-origin", "http://localhost:8233/"}, want: "want scheme://host[:port]"},
		{name: "group-readable key file", args: []string{"--codec-key-file", loose, "codec-server", "--insecure-no-auth"}, want: "mode 0644, want 0600"},
		{name: "key file from env", env: shortKey, args: []string{"codec-server", "--insecure-no-auth"}, want: shortKey + `:2: key "k1": key is 16 bytes, want 32`},
		{name: "missing token file", args: []string{"--codec-key-file", keys, "codec-server", "--auth-token-file", filepath.Join(dir, "nope")}, want: "auth token file"},
		{name: "an engine verb with a bad key file fails before dialling", args: []string{"--address", "127.0.0.1:1", "--codec-key-file", loose, "inspect", "x"}, want: "codec key file"},
		{name: "worker with a bad key file", args: []string{"--codec-key-file", shortKey, "worker"}, want: "key is 16 bytes"},
		{name: "dev: codec endpoint without a UI", args: []string{"dev", "--headless", "--ui-codec-endpoint", "http://127.0.0.1:8081"}, want: "needs the Web UI"},
		{name: "dev: codec endpoint not a URL", args: []string{"dev", "--ui-codec-endpoint", "127.0.0.1:8081"}, want: "invalid --ui-codec-endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTFLOW_CODEC_KEY_FILE", tt.env)
			code, out := runAgentctl(t, t.Context(), tt.args...)
			require.Equal(t, ExitInvalid, code, out)
			require.Contains(t, out, tt.want)
		})
	}
}

// codec-server end to end in process: it serves decode for a real
// encrypted payload with the token, refuses without, and stops on cancel.
func TestCodecServerServes(t *testing.T) {
	dir := t.TempDir()
	keys := writeCodecKeys(t, dir)
	const token = "0123456789abcdef-token"
	tokFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokFile, []byte(token+"\n"), 0o600))

	codec, err := payloadcodec.Load(keys)
	require.NoError(t, err)
	p, err := codec.DataConverter().ToPayload("marker-5e1f")
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrc := make(chan string, 1)
	o := &codecServerOptions{
		Options: &Options{CodecKeyFile: keys, Streams: Streams{Out: io.Discard, Err: io.Discard}},
		Listen:  "127.0.0.1:0", AuthTokenFile: tokFile, UIOrigin: "http://localhost:8233", LogLevel: "info",
		onListen: func(a string) { addrc <- a },
	}
	done := make(chan error, 1)
	go func() { done <- runCodecServer(ctx, o) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("codec-server exited: %v", err)
	}

	post := func(auth string) (int, string) {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, out := post("Bearer " + token)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, base64.StdEncoding.EncodeToString([]byte(`"marker-5e1f"`)))
	code, _ = post("")
	require.Equal(t, http.StatusUnauthorized, code)

	cancel()
	require.NoError(t, <-done)
}

// Without the key, a payload the codec encrypted fails to decode with a
// hint; other errors pass unchanged.
func TestCodecHint(t *testing.T) {
	codec, err := payloadcodec.Load(writeCodecKeys(t, t.TempDir()))
	require.NoError(t, err)
	p, err := codec.DataConverter().ToPayload("x")
	require.NoError(t, err)
	var s string
	err = converter.GetDefaultDataConverter().FromPayload(p, &s)
	require.ErrorIs(t, err, converter.ErrEncodingIsNotSupported)
	hinted := codecHint(err)
	require.ErrorIs(t, hinted, converter.ErrEncodingIsNotSupported)
	require.Contains(t, hinted.Error(), "pass --codec-key-file")

	other := errors.New("connection refused")
	require.Equal(t, other, codecHint(other))

	// The client's converter: the codec's for a codec client, else the default.
	require.Equal(t, converter.GetDefaultDataConverter(), payloadConverter(nil))
	require.NoError(t, payloadConverter(engineClient{dc: codec.DataConverter()}).FromPayload(p, &s))
	require.Equal(t, "x", s)
}
