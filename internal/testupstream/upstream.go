// Package testupstream gives integration and end-to-end tests the
// upstreams a live spec talks to, in a container on a Docker network the
// test owns: the image agentflow/test-upstream:latest
// (tools/build-images.sh; the server is package server, the binary
// cmd/agentflow-upstream) serving a feed, an OpenAI-compatible stub, a
// webhook receiver and an SMTP sink under the real names (techcrunch.com,
// api.openai.com, slack.com, hooks.slack.com, smtp.corp.com), with a
// certificate from a CA the test generates, and recording everything it
// receives for the test to read back (Recorded).
//
//	ca, _ := testupstream.NewCA()
//	up := testupstream.StartWith(t, docker, testupstream.Options{Network: net, CA: ca, Labels: labels})
//	// worker: --egress-network net --egress-resolve techcrunch.com=<up.IP> ...
//	//         --egress-allow-cidr <up.Subnet> --egress-ca-file <file with up.CAPEM()>
//	rec, _ := up.Recorded(ctx)
//	rec.Service("openai")[0].Header.Get("Authorization") // the brokered key
//
// Only tests import this package.
package testupstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/agentflow/agentflow/internal/testupstream/server"
)

// Image is the upstream's image, built by tools/build-images.sh.
const Image = "agentflow/test-upstream:latest"

// Ports the upstream listens on inside its container.
const (
	HTTPPort       = 80
	HTTPSPort      = 443
	SMTPPort       = 25
	SubmissionPort = 587
	ControlPort    = 8081
)

// Label marks every upstream container.
const Label = "agentflow.test-upstream"

// DefaultNames are the names on the upstream's certificate and its
// aliases on the network: the hosts the seed's live specs reach.
var DefaultNames = []string{"techcrunch.com", "api.openai.com", "slack.com", "hooks.slack.com", "smtp.corp.com"}

// startTimeout bounds creating, starting and waiting for the upstream.
const startTimeout = 90 * time.Second

// DockerAPI is what Start needs of a Docker client; *client.Client has it.
type DockerAPI interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
}

// Options configure StartWith.
type Options struct {
	// Network is the Docker network the upstream joins (required). The
	// test creates it, and registers its removal before StartWith so that
	// the container (removed by StartWith's cleanup) goes first. The test
	// process must reach container addresses on it (true for a local
	// daemon's bridge networks).
	Network string
	// Image defaults to Image.
	Image string
	// Names go on the certificate and become network aliases (so a
	// container on Network, the egress proxy say, resolves them through
	// Docker's DNS). Default DefaultNames.
	Names []string
	// NoAliases leaves the names off the network.
	NoAliases bool
	// CA signs the upstream's certificate; default a new one.
	CA *CA
	// Labels are added to the container's (Label=1 is always set).
	Labels map[string]string
	// Args are extra flags of agentflow-upstream, e.g. "-require-auth=false".
	Args []string
}

// Upstream is a running upstream container.
type Upstream struct {
	ID      string
	Name    string
	Network string
	// IP is the container's address on Network; Subnet that network's
	// IPv4 prefix (for the worker's --egress-allow-cidr).
	IP     string
	Subnet string
	Names  []string
	CA     *CA
	// ControlURL is the control endpoint: GET /recorded, GET /healthz,
	// POST /reset.
	ControlURL string

	c DockerAPI
}

// Start runs the upstream on network with the default options; see StartWith.
func Start(t testing.TB, c DockerAPI, networkName string) *Upstream {
	t.Helper()
	return StartWith(t, c, Options{Network: networkName})
}

// StartWith runs the upstream and returns once every listener is bound
// and the control endpoint answers. The container is removed when t ends
// (its log is printed first when t failed). Any failure fails t.
func StartWith(t testing.TB, c DockerAPI, opts Options) *Upstream {
	t.Helper()
	u, err := start(t, c, opts)
	if err != nil {
		t.Fatalf("test upstream: %v", err)
	}
	return u
}

func start(t testing.TB, c DockerAPI, opts Options) (*Upstream, error) {
	if opts.Network == "" {
		return nil, errors.New("Options.Network is required")
	}
	if opts.Image == "" {
		opts.Image = Image
	}
	if len(opts.Names) == 0 {
		opts.Names = DefaultNames
	}
	if opts.CA == nil {
		ca, err := NewCA()
		if err != nil {
			return nil, err
		}
		opts.CA = ca
	}
	leaf, err := opts.CA.Leaf(opts.Names...)
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[Label] = "1"
	var aliases []string
	if !opts.NoAliases {
		aliases = slices.Clone(opts.Names)
	}
	name := "agentflow-test-upstream-" + randHex(6)
	pids := int64(64)
	mem := int64(128 << 20)

	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	created, err := c.ContainerCreate(ctx,
		&container.Config{
			Image:  opts.Image,
			Env:    []string{server.EnvCert + "=" + string(leaf.CertPEM), server.EnvKey + "=" + string(leaf.KeyPEM)},
			Cmd:    opts.Args,
			Labels: labels,
		},
		&container.HostConfig{
			NetworkMode:    container.NetworkMode(opts.Network),
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			// Ports below 1024 without a capability.
			Sysctls:   map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
			Resources: container.Resources{Memory: mem, MemorySwap: mem, PidsLimit: &pids},
		},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{opts.Network: {Aliases: aliases}}},
		nil, name)
	if err != nil {
		return nil, fmt.Errorf("create container (image %s: run tools/build-images.sh test-upstream): %w", opts.Image, err)
	}
	u := &Upstream{ID: created.ID, Name: name, Network: opts.Network, Names: slices.Clone(opts.Names), CA: opts.CA, c: c}
	t.Cleanup(func() { u.remove(t) })

	if err := c.ContainerStart(ctx, u.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := u.waitReady(ctx); err != nil {
		return nil, err
	}
	info, err := c.ContainerInspect(ctx, u.ID)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", name, err)
	}
	var ep *network.EndpointSettings
	if info.NetworkSettings != nil {
		ep = info.NetworkSettings.Networks[opts.Network]
	}
	if ep == nil || ep.IPAddress == "" {
		return nil, fmt.Errorf("%s has no address on network %s", name, opts.Network)
	}
	u.IP = ep.IPAddress
	if ip, err := netip.ParseAddr(ep.IPAddress); err == nil {
		u.Subnet = netip.PrefixFrom(ip, ep.IPPrefixLen).Masked().String()
	}
	u.ControlURL = "http://" + u.Addr(ControlPort)
	if err := u.healthy(ctx); err != nil {
		return nil, fmt.Errorf("control endpoint %s (can the test process reach addresses on %s?): %w", u.ControlURL, opts.Network, err)
	}
	return u, nil
}

// waitReady follows the container's output until the server's ready
// line; the output ending first (the server exited) is an error quoting
// its log.
func (u *Upstream) waitReady(ctx context.Context) error {
	rc, err := u.c.ContainerLogs(ctx, u.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return fmt.Errorf("follow %s: %w", u.Name, err)
	}
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, err := stdcopy.StdCopy(pw, &stderr, rc)
		pw.CloseWithError(err)
	}()
	defer func() {
		rc.Close()
		_, _ = io.Copy(io.Discard, pr) // let the copier finish
		<-copied
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		var line struct{ Type string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "ready" {
			return nil
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s not ready: %w; log: %s", u.Name, ctx.Err(), stderr.String())
	}
	return fmt.Errorf("%s exited before it was ready; log: %s", u.Name, stderr.String())
}

func (u *Upstream) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.ControlURL+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := controlClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

func (u *Upstream) remove(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if t.Failed() {
		if log, err := u.Logs(ctx); err == nil {
			t.Logf("test upstream %s log:\n%s", u.Name, log)
		}
	}
	if err := u.c.ContainerRemove(ctx, u.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Errorf("remove test upstream %s: %v", u.Name, err)
	}
}

var controlClient = &http.Client{Timeout: 15 * time.Second}

// Addr is the upstream's address for port on its network.
func (u *Upstream) Addr(port int) string {
	return net.JoinHostPort(u.IP, strconv.Itoa(port))
}

// CAPEM is the PEM of the CA the upstream's certificate chains to: what a
// client (or the egress proxy, through --egress-ca-file) must trust.
func (u *Upstream) CAPEM() []byte { return u.CA.CertPEM }

// Resolve maps every name to the upstream's address (the worker's
// --egress-resolve name=ip, the proxy's wire.Config.Resolve).
func (u *Upstream) Resolve() map[string]string {
	m := make(map[string]string, len(u.Names))
	for _, n := range u.Names {
		m[n] = u.IP
	}
	return m
}

// HTTPClient is a client for tests that talk to the upstream directly:
// it trusts the CA and sends every name of the upstream to its address.
func (u *Upstream) HTTPClient() *http.Client {
	names := map[string]bool{}
	for _, n := range u.Names {
		names[n] = true
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err == nil && names[host] {
				addr = net.JoinHostPort(u.IP, port)
			}
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: u.CA.Pool(), MinVersion: tls.VersionTLS12},
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Recorded returns every request and message the upstream received.
func (u *Upstream) Recorded(ctx context.Context) (server.Recorded, error) {
	var rec server.Recorded
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.ControlURL+"/recorded", nil)
	if err != nil {
		return rec, err
	}
	resp, err := controlClient.Do(req)
	if err != nil {
		return rec, fmt.Errorf("read recorded: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("read recorded: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		return rec, fmt.Errorf("decode recorded: %w", err)
	}
	return rec, nil
}

// Reset forgets everything recorded so far.
func (u *Upstream) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.ControlURL+"/reset", nil)
	if err != nil {
		return err
	}
	resp, err := controlClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("reset: %s", resp.Status)
	}
	return nil
}

// Logs returns the container's output so far (stdout then stderr).
func (u *Upstream) Logs(ctx context.Context) (string, error) {
	rc, err := u.c.ContainerLogs(ctx, u.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, rc); err != nil {
		return "", err
	}
	return out.String() + errb.String(), nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
