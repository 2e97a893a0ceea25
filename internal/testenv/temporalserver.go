package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// PostgresServer is a PostgreSQL server of one test (Debian's packages),
// trusting local connections as user postgres.
type PostgresServer struct {
	Addr string // 127.0.0.1:port
	Port int
	p    *process
}

// Postgres starts a PostgreSQL server for t from the installed Debian
// packages (/usr/lib/postgresql/*/bin; missing → skip, or fail under
// AGENTFLOW_REQUIRE_DOCKER=1). PostgreSQL refuses to run as root, so
// under root it runs as the postgres user, in a directory it owns.
func Postgres(t testing.TB) *PostgresServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	Need(t, len(bins) > 0, "PostgreSQL server not installed (apt-get install postgresql)")
	binDir := filepath.Dir(bins[len(bins)-1])

	dir, err := os.MkdirTemp("", "agentflow-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		Need(t, err == nil, "running as root and no postgres user: %v", err)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "--auth=trust", "--username=postgres", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := FreePort(t)
	pg := &PostgresServer{Addr: hostPort(port), Port: port}
	pg.p = &process{
		name: "postgres",
		bin:  filepath.Join(binDir, "postgres"),
		args: []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200"},
		logPath:     filepath.Join(dir, "postgres.log"),
		sysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred},
		ready: func() bool {
			return exec.Command(filepath.Join(binDir, "pg_isready"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-q").Run() == nil
		},
	}
	// The log file is created by us (root) before postgres writes it.
	if f, err := os.Create(pg.p.logPath); err == nil {
		f.Close()
		if cred != nil {
			_ = os.Chown(pg.p.logPath, int(cred.Uid), int(cred.Gid))
		}
	}
	pg.p.start(t)
	t.Cleanup(pg.p.stop)
	return pg
}

// TemporalServerOptions configure StartTemporalServer.
type TemporalServerOptions struct {
	// MTLS makes the frontend require TLS with a client certificate from
	// PKI's CA (its server certificate names PKI.ServerName).
	MTLS bool
	PKI  *PKI
}

// TemporalServer is the full Temporal server (all four services in one
// process) on a PostgreSQL database: what a production cluster runs, as
// opposed to the CLI's dev server.
type TemporalServer struct {
	Address string // the frontend, host:port
	p       *process
}

// StartTemporalServer builds nothing: it runs the server and the SQL
// schema tool that scripts/test-servers.sh temporal-server built into the
// cache (AGENTFLOW_TEMPORAL_SERVER names the directory; missing → skip,
// or fail under AGENTFLOW_REQUIRE_DOCKER=1), on pg, with the schema the
// tool applies from the server's own release.
func StartTemporalServer(t testing.TB, pg *PostgresServer, opts TemporalServerOptions) *TemporalServer {
	t.Helper()
	dir := os.Getenv("AGENTFLOW_TEMPORAL_SERVER")
	if dir == "" {
		cache := os.Getenv("AGENTFLOW_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "agentflow")
		}
		dir = filepath.Join(cache, "temporal-server-"+TemporalServerVersion)
	}
	server, sqlTool, schema := filepath.Join(dir, "temporal-server"), filepath.Join(dir, "temporal-sql-tool"), filepath.Join(dir, "schema")
	for _, p := range []string{server, sqlTool, schema} {
		_, err := os.Stat(p)
		Need(t, err == nil, "%s missing (run scripts/test-servers.sh temporal-server, or set AGENTFLOW_TEMPORAL_SERVER)", p)
	}
	for _, db := range []struct{ name, versioned string }{
		{"temporal", "postgresql/v12/temporal/versioned"},
		{"temporal_visibility", "postgresql/v12/visibility/versioned"},
	} {
		base := []string{"--plugin", "postgres12", "--ep", "127.0.0.1", "-p", strconv.Itoa(pg.Port), "-u", "postgres", "--db", db.name}
		for _, args := range [][]string{
			append(append([]string{}, base...), "create-database"),
			append(append([]string{}, base...), "setup-schema", "-v", "0.0"),
			append(append([]string{}, base...), "update-schema", "-d", filepath.Join(schema, db.versioned)),
		} {
			if out, err := exec.Command(sqlTool, args...).CombinedOutput(); err != nil {
				t.Fatalf("temporal-sql-tool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}

	root := t.TempDir()
	cfgDir := filepath.Join(root, "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Membership ports go into a smallint column of the SQL schema
	// (cluster_membership.rpc_port): they must stay below 32768, where
	// FreePort's ephemeral range does not reach.
	ports := lowPorts(t, 9)
	frontend := hostPort(ports[0])
	tlsCfg := ""
	if opts.MTLS {
		p := opts.PKI
		tlsCfg = fmt.Sprintf(`
  tls:
    frontend:
      server:
        certFile: %[1]s
        keyFile: %[2]s
        clientCaFiles: [%[3]s]
        requireClientAuth: true
      client:
        serverName: %[4]s
        rootCaFiles: [%[3]s]
    systemWorker:
      certFile: %[5]s
      keyFile: %[6]s
      client:
        serverName: %[4]s
        rootCaFiles: [%[3]s]`, p.ServerCert, p.ServerKey, p.CAFile, p.ServerName, p.ClientCert, p.ClientKey)
	}
	// The configuration make up TEMPORAL=postgres runs too: one template.
	tmpl, err := os.ReadFile(filepath.Join(RepoRoot(t), "deploy", "temporal", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"PG_ADDR": pg.Addr, "PG_PASSWORD": "", "FRONTEND_BIND_IP": "127.0.0.1", "TLS": tlsCfg, "DYNAMIC_CONFIG_FILE": filepath.Join(cfgDir, "dynamicconfig.yaml"),
		"FRONTEND_PORT": strconv.Itoa(ports[0]), "FRONTEND_MEMBERSHIP_PORT": strconv.Itoa(ports[1]),
		"FRONTEND_HTTP_PORT": strconv.Itoa(ports[2]), "HISTORY_PORT": strconv.Itoa(ports[3]),
		"HISTORY_MEMBERSHIP_PORT": strconv.Itoa(ports[4]), "MATCHING_PORT": strconv.Itoa(ports[5]),
		"MATCHING_MEMBERSHIP_PORT": strconv.Itoa(ports[6]), "WORKER_PORT": strconv.Itoa(ports[7]),
		"WORKER_MEMBERSHIP_PORT": strconv.Itoa(ports[8]),
	}
	cfg := os.Expand(string(tmpl), func(k string) string {
		v, ok := vars[k]
		if !ok {
			t.Fatalf("deploy/temporal/config.yaml: unknown placeholder ${%s}", k)
		}
		return v
	})
	if err := os.WriteFile(filepath.Join(cfgDir, "development.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dyn, err := os.ReadFile(filepath.Join(RepoRoot(t), "deploy", "temporal", "dynamicconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "dynamicconfig.yaml"), dyn, 0o600); err != nil {
		t.Fatal(err)
	}

	var clientTLS *tls.Config
	if opts.MTLS {
		cert, err := tls.LoadX509KeyPair(opts.PKI.ClientCert, opts.PKI.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		pem, _ := os.ReadFile(opts.PKI.CAFile)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		clientTLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: opts.PKI.ServerName, MinVersion: tls.VersionTLS12}
	}
	ts := &TemporalServer{Address: frontend}
	ts.p = &process{
		name:    "temporal-server",
		bin:     server,
		args:    []string{"--root", root, "--config", "config", "--env", "development", "--allow-no-auth", "start"},
		logPath: filepath.Join(root, "server.log"),
		ready:   func() bool { return frontendServing(frontend, clientTLS) },
	}
	ts.p.start(t)
	t.Cleanup(ts.p.stop)
	return ts
}

// Log is the end of the server's log.
func (s *TemporalServer) Log() string { return s.p.logTail() }

// frontendServing: the frontend completes a gRPC health check (plaintext
// or TLS); a plain HTTP/2 probe would need the generated stubs here.
func frontendServing(addr string, cfg *tls.Config) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return grpcHealthy(ctx, addr, cfg)
}

// lowPorts returns n free TCP ports below 32768.
func lowPorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		p := 20000 + rand.IntN(12000)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", hostPort(p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("no %d free ports below 32768", n)
	}
	return ports
}

// grpcHealthy dials the frontend as a client would and asks its health.
func grpcHealthy(ctx context.Context, addr string, cfg *tls.Config) bool {
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, ConnectionOptions: client.ConnectionOptions{TLS: cfg},
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err == nil
}
