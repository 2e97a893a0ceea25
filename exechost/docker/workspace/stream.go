package workspace

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
)

// Runner is the part of runner.Runner the workspace uses.
type Runner interface {
	Run(ctx context.Context, containerID string, cmd runner.Command) (runner.Result, error)
}

// Opener opens one layer of a workspace (a checkpoint, a git revision from exechost/gitsource).
type Opener func(ctx context.Context) (io.ReadCloser, error)

// Commands run inside the sandbox, as the sandbox user. busybox tar:
// -o keeps extracted files owned by the extracting (non-root) user.
var (
	extractArgv = []string{"tar", "-x", "-o", "-f", "-", "-C", policy.WorkspaceDir}
	createArgv  = []string{"tar", "-c", "-f", "-", "-C", policy.WorkspaceDir, "."}
)

// maxStderr bounds what tar may say about a failure.
const maxStderr = 64 << 10

var (
	errImportEnded = errors.New("import ended")
	errExportEnded = errors.New("export ended")
)

// Result says whether a transfer destroyed the sandbox: the runner removes
// the container when a stream fails midway, as for any aborted command.
type Result struct {
	Bytes     int64 // regular-file content that passed the filter
	Entries   int
	Destroyed bool
	// Names are the imported entries (Import only): Redaction.Inherited of
	// the workspace's later exports.
	Names map[string]string
}

// Import unpacks the layers, in order, through one Filter into the
// sandbox's /workspace. Nothing is extracted on the host. Every layer is
// read to its end (see Filter.Copy), so a verifying layer reader checks
// every byte; Import returns nil only after the last layer passed, and the
// caller must destroy the sandbox on any error, since its tar may already
// have unpacked part of a layer.
func Import(ctx context.Context, r Runner, containerID, user string, limits Limits, layers ...Opener) (Result, error) {
	if len(layers) == 0 {
		return Result{}, nil
	}
	pr, pw := io.Pipe()
	f := NewFilter(limits)
	f.RecordNames()
	prodDone := make(chan error, 1)
	go func() {
		err := produce(ctx, pw, f, layers)
		pw.CloseWithError(err)
		prodDone <- err
	}()
	var stderr strings.Builder
	res, runErr := r.Run(ctx, containerID, runner.Command{
		Argv:      extractArgv,
		User:      user,
		WorkDir:   policy.WorkspaceDir,
		Stdin:     pr,
		Stderr:    &limitedWriter{w: &stderr, n: maxStderr},
		MaxOutput: 2 * maxStderr,
	})
	// Unblock the producer if tar stopped reading early.
	pr.CloseWithError(errImportEnded)
	prodErr := <-prodDone
	out := Result{Bytes: f.Bytes(), Entries: f.Entries(), Destroyed: res.Destroyed, Names: f.Names()}
	switch {
	case prodErr != nil && errors.Is(prodErr, errImportEnded) && runErr == nil && res.ExitCode == 0:
		// tar finished before every layer was read to its end, so not
		// every byte was verified: never a usable workspace.
		return out, fmt.Errorf("import workspace: tar ended before the layers were verified: %w", ErrMalformedArchive)
	case prodErr != nil && !errors.Is(prodErr, errImportEnded):
		return out, streamErr("import workspace", prodErr, runErr)
	case runErr != nil:
		return out, fmt.Errorf("import workspace: %w", runErr)
	case res.ExitCode != 0:
		return out, fmt.Errorf("import workspace: tar exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func produce(ctx context.Context, w io.Writer, f *Filter, layers []Opener) error {
	tw := tar.NewWriter(w)
	for i, open := range layers {
		rc, err := open(ctx)
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = f.Copy(tw, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return tw.Close()
}

// Export streams /workspace out of the sandbox as a filtered tar into w. The
// raw stream is bounded by limits (a sparse file that tar expands past the
// workspace size is refused) and hard links, devices and links pointing out
// are refused rather than stored. File content is redacted of the redact
// values and an entry named after one is refused (ErrSecretName) without
// destroying the sandbox; see Filter.Redact.
func Export(ctx context.Context, r Runner, containerID, user string, limits Limits, redact Redaction, w io.Writer) (Result, error) {
	pr, pw := io.Pipe()
	f := NewFilter(limits)
	f.Redact(redact)
	filtDone := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(w)
		err := f.Copy(tw, pr)
		if err == nil {
			err = tw.Close()
		}
		// A failing filter fails tar's writes, and the runner then
		// destroys the sandbox like any aborted command.
		pr.CloseWithError(err)
		filtDone <- err
	}()
	var stderr strings.Builder
	res, runErr := r.Run(ctx, containerID, runner.Command{
		Argv:    createArgv,
		User:    user,
		WorkDir: policy.WorkspaceDir,
		Stdout:  pw,
		Stderr:  &limitedWriter{w: &stderr, n: maxStderr},
		// The filter bounds content; this bounds the raw stream as well.
		MaxOutput: limits.MaxStreamBytes() + maxStderr,
	})
	if runErr == nil && res.ExitCode == 0 {
		pw.Close()
	} else {
		pw.CloseWithError(errExportEnded)
	}
	filtErr := <-filtDone
	out := Result{Bytes: f.Bytes(), Entries: f.Entries(), Destroyed: res.Destroyed}
	switch {
	case filtErr != nil && !errors.Is(filtErr, errExportEnded):
		return out, streamErr("export workspace", filtErr, runErr)
	case runErr != nil:
		return out, fmt.Errorf("export workspace: %w", runErr)
	case res.ExitCode != 0:
		return out, fmt.Errorf("export workspace: tar exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// streamErr reports a failed stream (ours: the layers, the filter, the
// store behind them) together with tar's error, unless tar only failed
// because of ours (the closed pipe hands it our error, which it wraps):
// then the cause is said once, not nested in its own echo.
func streamErr(op string, err, runErr error) error {
	if runErr == nil || errors.Is(runErr, err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w (tar: %w)", op, err, runErr)
}

// limitedWriter keeps the first n bytes and silently drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
