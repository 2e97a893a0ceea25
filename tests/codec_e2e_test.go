//go:build e2e

package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/cli/engine"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/payloadcodec"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
)

// The codec suite runs agentctl and the worker with --codec-key-file
// against a real dev server whose Web UI decodes through `agentctl
// codec-server`, and checks what Temporal holds: no marker of an input, an
// output or an error message in `temporal workflow show -o json`, all of
// them in `agentctl inspect` (with the key), and the decoded input in the
// Web UI as a real headless browser renders it.

// Distinctive markers: each must appear in no form (plain, base64, hex,
// JSON-escaped) in the history Temporal stores.
const (
	codecInputMarker  = "codec-e2e-input-7f3a9c51"
	codecLiteralMark  = "codec-e2e-literal-2b8d64e0"
	codecOutputMarker = "codec-e2e-output-c41e9a07"
	codecErrorMarker  = "codec-e2e-error-93d0b6f2"
)

// The ok run: the literal marker is in the plan (the run's input), the
// input marker arrives through --input, the output marker is what the
// tool returns and the run's output.
const codecOKSpec = `name: codec-ok
version: "1.0.0"
inputs:
  - {name: msg, type: string, required: true}
steps:
  - id: echo
    tool: testtool:1.0
    inputs: {mode: ok, note: "` + codecLiteralMark + `", msg: "{{ .inputs.msg }}", out: "` + codecOutputMarker + `"}
outputs:
  - {name: result, value: "{{ .steps.echo.output.out }}"}
`

// The failing run: the tool's error message carries the error marker.
const codecFailSpec = `name: codec-fail
version: "1.0.0"
steps:
  - id: broken
    tool: testtool:1.0
    retries: 0
    inputs: {mode: errorfield, message: "` + codecErrorMarker + `"}
`

type codecEnv struct {
	address string
	keys    string // the codec key file
	uiURL   string
	dir     string
}

// agentctl runs one invocation in process with the codec key (unless
// noKey) and returns exit code and combined output.
func (e *codecEnv) agentctl(t *testing.T, noKey bool, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	full := []string{"--address", e.address}
	if !noKey {
		full = append(full, "--codec-key-file", e.keys)
	}
	full = append(full, args...)
	code := cli.Run(ctx, "test", full, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, engine.Commands())
	t.Logf("agentctl %s → %d\n%s%s", strings.Join(full, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func writeCodecKeyFile(t *testing.T, dir string) string {
	t.Helper()
	k := make([]byte, payloadcodec.KeyBytes)
	for i := range k {
		k[i] = byte(i*7 + 3)
	}
	p := filepath.Join(dir, "codec.keys")
	require.NoError(t, os.WriteFile(p, []byte("# e2e codec keys\ne2e-1 "+base64.StdEncoding.EncodeToString(k)+"\n"), 0o600))
	return p
}

// startCodecServer runs `agentctl codec-server --listen addr args...` in
// process until the test ends, and waits until it accepts connections.
func startCodecServer(t *testing.T, keys, addr string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out syncBuffer
	full := append([]string{"--codec-key-file", keys, "codec-server", "--listen", addr, "--log-level", "debug"}, args...)
	go func() {
		done <- cli.Run(ctx, "test", full, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out}, engine.Commands())
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-done)
		t.Logf("codec-server log:\n%s", out.String())
	})
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case code := <-done:
			t.Fatalf("codec-server exited with %d: %s", code, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		require.Less(t, i, 300, "codec-server never listened on %s", addr)
	}
}

func startCodecEnv(t *testing.T) *codecEnv {
	t.Helper()
	root := testenv.RepoRoot(t)
	testenv.Docker(t)
	bin := testenv.TemporalBinary(t)
	loadImages(t, root, "testtool")

	tmp := t.TempDir()
	e := &codecEnv{dir: tmp, keys: writeCodecKeyFile(t, tmp)}
	uiPort := testenv.FreePort(t)
	codecAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	uiOrigin := "http://127.0.0.1:" + strconv.Itoa(uiPort)
	e.uiURL = uiOrigin
	startCodecServer(t, e.keys, codecAddr, "--insecure-no-auth", "--ui-origin", uiOrigin)

	label := fmt.Sprintf("codec-%d-%d", os.Getpid(), time.Now().UnixNano())
	st := startStack(t, bin, tmp, worker.Config{
		HealthAddr:    "-",
		MetricsAddr:   "-",
		CheckpointDir: filepath.Join(tmp, "checkpoints"),
		LogDir:        filepath.Join(tmp, "logs"),
		StopTimeout:   10 * time.Second,
		SandboxLabels: map[string]string{"agentflow.test": "1", "agentflow.e2e": label},
		CodecKeyFile:  e.keys,
	}, nil, func(o *devserver.Options) {
		o.Headless = false
		o.UIPort = uiPort
		o.UICodecEndpoint = "http://" + codecAddr
	})
	e.address = st.address
	return e
}

// temporalShow is `temporal workflow show -o json` of one run: the history
// as Temporal stores it, read by Temporal's own CLI without any codec.
func (e *codecEnv) temporalShow(t *testing.T, id string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := append([]string{"workflow", "show", "--address", e.address, "--namespace", "default", "-w", id, "-o", "json"}, extra...)
	cmd := exec.CommandContext(ctx, testenv.TemporalBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "temporal workflow show: %s", stderr.String())
	return string(out)
}

// requireNoForms fails if any form of any marker is in s.
func requireNoForms(t *testing.T, what, s string, markers ...string) {
	t.Helper()
	for _, f := range exechost.SecretForms(markers) {
		require.NotContains(t, s, f, "%s holds a form of a marker in clear", what)
	}
}

// requireAForm fails unless some form of marker is in s.
func requireAForm(t *testing.T, what, s, marker string) {
	t.Helper()
	for _, f := range exechost.SecretForms([]string{marker}) {
		if strings.Contains(s, f) {
			return
		}
	}
	t.Fatalf("%s: no form of %q", what, marker)
}

func TestCodecE2E(t *testing.T) {
	e := startCodecEnv(t)
	img := loadImages(t, testenv.RepoRoot(t), "testtool")["testtool"]
	all := []string{codecInputMarker, codecLiteralMark, codecOutputMarker, codecErrorMarker}

	// The tool registry runs through the same encrypting client and worker.
	code, _, errOut := e.agentctl(t, false, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", img)
	require.Equal(t, 0, code, errOut)

	okID := fmt.Sprintf("codec-ok-%d", time.Now().UnixNano())
	failID := fmt.Sprintf("codec-fail-%d", time.Now().UnixNano())
	okSpec := filepath.Join(e.dir, "ok.yaml")
	failSpec := filepath.Join(e.dir, "fail.yaml")
	require.NoError(t, os.WriteFile(okSpec, []byte(codecOKSpec), 0o600))
	require.NoError(t, os.WriteFile(failSpec, []byte(codecFailSpec), 0o600))

	code, out, errOut := e.agentctl(t, false, "run", "-f", okSpec, "--name", okID, "--input", "msg="+codecInputMarker, "--wait", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, codecOutputMarker, "the run's result, decrypted by agentctl")
	code, _, errOut = e.agentctl(t, false, "run", "-f", failSpec, "--name", failID, "--wait")
	require.Equal(t, 1, code, errOut)

	t.Run("history holds no plaintext", func(t *testing.T) {
		for _, id := range []string{okID, failID} {
			h := e.temporalShow(t, id)
			requireNoForms(t, "history of "+id, h, all...)
			// The payloads are there, encrypted: the check looked at them.
			require.Contains(t, h, base64.StdEncoding.EncodeToString([]byte(payloadcodec.EncodingEncrypted)), "history of %s has no encrypted payload", id)
		}
		// The registry's history too (tool descriptions, usage, probe results).
		reg := e.temporalShow(t, registry.WorkflowID)
		require.Contains(t, reg, base64.StdEncoding.EncodeToString([]byte(payloadcodec.EncodingEncrypted)), "registry payloads are encrypted")
		requireNoForms(t, "registry history", reg, "misbehaves on purpose", "echo the input")
	})

	t.Run("inspect with the key shows everything", func(t *testing.T) {
		code, out, errOut := e.agentctl(t, false, "inspect", okID)
		require.Equal(t, 0, code, errOut)
		for _, m := range []string{codecInputMarker, codecOutputMarker} {
			require.Contains(t, out, m)
		}
		code, out, errOut = e.agentctl(t, false, "inspect", failID)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, codecErrorMarker, "the step's error message, decrypted")
	})

	t.Run("inspect without the key shows nothing and says why", func(t *testing.T) {
		_, out, errOut := e.agentctl(t, true, "inspect", okID)
		requireNoForms(t, "inspect without the key", out+errOut, all...)
		require.Contains(t, errOut, "pass --codec-key-file")
	})

	t.Run("temporal CLI decodes through codec-server with its token", func(t *testing.T) {
		tokFile := filepath.Join(e.dir, "codec.token")
		const token = "e2e-codec-token-5d2c81f0a9"
		require.NoError(t, os.WriteFile(tokFile, []byte(token+"\n"), 0o600))
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
		startCodecServer(t, e.keys, addr, "--auth-token-file", tokFile)

		// The CLI prints decoded payload data in base64.
		h := e.temporalShow(t, failID, "--codec-endpoint", "http://"+addr, "--codec-auth", "Bearer "+token)
		requireAForm(t, "decoded history of the failed run (its failure message)", h, codecErrorMarker)
		h = e.temporalShow(t, okID, "--codec-endpoint", "http://"+addr, "--codec-auth", "Bearer "+token)
		requireAForm(t, "decoded history of the ok run (input)", h, codecInputMarker)
		requireAForm(t, "decoded history of the ok run (output)", h, codecOutputMarker)
	})

	t.Run("web UI decodes through the codec server", func(t *testing.T) {
		chromium, err := exec.LookPath("chromium")
		testenv.Need(t, err == nil, "chromium not installed (apt-get install chromium): %v", err)
		artifacts := os.Getenv("AGENTFLOW_ARTIFACTS")
		if artifacts == "" {
			artifacts = t.TempDir()
		}
		require.NoError(t, os.MkdirAll(artifacts, 0o755))

		page := e.uiURL + "/namespaces/default/workflows/" + okID
		var dom string
		// The UI is a single-page app: the DOM holds the decoded input only
		// once it has fetched the history and the codec server answered.
		for attempt, budget := range []int{20000, 40000, 80000} {
			dom = runChromium(t, chromium, e.dir, "--virtual-time-budget="+strconv.Itoa(budget), "--dump-dom", page)
			if strings.Contains(dom, codecInputMarker) && strings.Contains(dom, codecLiteralMark) {
				break
			}
			t.Logf("attempt %d: the page does not show the decoded input yet", attempt+1)
		}
		require.NoError(t, os.WriteFile(filepath.Join(artifacts, "codec-ui.html"), []byte(dom), 0o644))
		// The run's input (workflows.Input: the plan with its literal, and
		// the --input value), decoded by the codec server for the browser.
		require.Contains(t, dom, codecLiteralMark, "the Web UI shows the run's input decoded (DOM in %s)", artifacts)
		require.Contains(t, dom, codecInputMarker, "the Web UI shows the run's input decoded (DOM in %s)", artifacts)
		require.NotContains(t, dom, "binary/encrypted", "the UI shows no payload it could not decode")

		shot := filepath.Join(artifacts, "codec-ui.png")
		runChromium(t, chromium, e.dir, "--virtual-time-budget=40000", "--window-size=1400,1800", "--screenshot="+shot, page)
		fi, err := os.Stat(shot)
		require.NoError(t, err, "screenshot")
		require.Positive(t, fi.Size())
		t.Logf("Web UI screenshot: %s", shot)
	})
}

// runChromium runs headless chromium once and returns its stdout.
func runChromium(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "chromium-profile-")
	require.NoError(t, err)
	full := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + profile}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}
