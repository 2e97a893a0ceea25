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
// sandbox's /workspace: Prepare, then Pending.Import.
func Import(ctx context.Context, r Runner, containerID, user string, limits Limits, layers ...Opener) (Result, error) {
	p, err := Prepare(ctx, limits, layers...)
	if err != nil {
		return Result{}, err
	}
	defer p.Close()
	return p.Import(ctx, r, containerID, user)
}

// Pending is an import whose layers were read, through its Filter, up to
// the first entry any of them holds: the layers before it were read to
// their end (every byte verified, nothing to write), the layer holding it
// is open with that entry checked, and the layers after it are not opened
// yet. An import with no entry at all needs no exec (Empty). It is used by
// one goroutine; Close releases an open layer that Import did not consume.
type Pending struct {
	f      *Filter
	layers []Opener // not opened yet
	cur    *layerCopy
	rc     io.ReadCloser // cur's source
	first  int           // index of cur's layer
}

// Prepare opens the layers in order and reads each through a new Filter
// until the first entry the filter would write. An empty layer (only the
// end-of-archive marker, or only the workspace root) is read to its end and
// closed, so its reader verifies it as Import would have. Layers after the
// one holding the first entry are left for Import, so the filter checks
// every entry with the state of the layers before it, exactly as one
// uninterrupted Import does. Prepare needs no sandbox: call it before one
// exists. Its errors are Import's (ErrMalformedArchive, ErrUnsafeEntry,
// ErrTooLarge, or the layer's own).
func Prepare(ctx context.Context, limits Limits, layers ...Opener) (*Pending, error) {
	f := NewFilter(limits)
	f.RecordNames()
	p := &Pending{f: f, first: len(layers)}
	for i, open := range layers {
		rc, err := open(ctx)
		if err != nil {
			return nil, fmt.Errorf("import workspace: layer %d: %w", i, err)
		}
		l := f.begin(rc)
		h, err := l.next()
		if err == nil && h != nil {
			l.hold(h)
			p.cur, p.rc, p.first, p.layers = l, rc, i, layers[i+1:]
			return p, nil
		}
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("import workspace: layer %d: %w", i, err)
		}
	}
	return p, nil
}

// Empty reports that no layer holds an entry: every layer was read to its
// end and verified, and Import has nothing to unpack.
func (p *Pending) Empty() bool { return p.cur == nil }

// Close closes the open layer if Import did not take it.
func (p *Pending) Close() {
	if p.rc != nil {
		_ = p.rc.Close()
		p.rc, p.cur = nil, nil
	}
}

func (p *Pending) result() Result {
	return Result{Bytes: p.f.Bytes(), Entries: p.f.Entries(), Names: p.f.Names()}
}

// Import unpacks the prepared layers into the sandbox's /workspace with one
// exec, or with none when the import is Empty. Nothing is extracted on the
// host. Every layer is read to its end (see Filter.Copy), so a verifying
// layer reader checks every byte; Import returns nil only after the last
// layer passed, and the caller must destroy the sandbox on any error, since
// its tar may already have unpacked part of a layer. Call it once.
func (p *Pending) Import(ctx context.Context, r Runner, containerID, user string) (Result, error) {
	if p.Empty() {
		return p.result(), nil
	}
	cur, rc, first, rest := p.cur, p.rc, p.first, p.layers
	p.cur, p.rc = nil, nil // the producer closes rc
	pr, pw := io.Pipe()
	prodDone := make(chan error, 1)
	go func() {
		err := produce(ctx, pw, cur, rc, first, rest)
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
	out := p.result()
	out.Destroyed = res.Destroyed
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

// produce writes the layer in progress (cur, layer number first, read from
// rc) and then the rest, opened one by one, as one tar stream to w.
func produce(ctx context.Context, w io.Writer, cur *layerCopy, rc io.ReadCloser, first int, rest []Opener) error {
	tw := tar.NewWriter(w)
	err := cur.copyTo(tw)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("layer %d: %w", first, err)
	}
	for i, open := range rest {
		n := first + 1 + i
		rc, err := open(ctx)
		if err != nil {
			return fmt.Errorf("layer %d: %w", n, err)
		}
		err = cur.f.Copy(tw, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("layer %d: %w", n, err)
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
