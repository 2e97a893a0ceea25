package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOServer is a real MinIO (S3) server on loopback, with its own data
// directory, random root credentials and one bucket, stopped when the test
// ends.
type MinIOServer struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	Addr      string // "127.0.0.1:PORT"
	AccessKey string
	SecretKey string
	Bucket    string
	Region    string
	DataDir   string

	p *process
	t testing.TB
}

// MinIO starts a MinIO server for t (binary from AGENTFLOW_MINIO or the
// scripts/test-servers.sh cache; missing → skip, or fail under
// AGENTFLOW_REQUIRE_DOCKER=1) and creates Bucket in it.
func MinIO(t testing.TB) *MinIOServer {
	t.Helper()
	bin := serverBinary(t, "AGENTFLOW_MINIO", "minio", MinIOVersion)
	dir := t.TempDir()
	addr, console := hostPort(FreePort(t)), hostPort(FreePort(t))
	m := &MinIOServer{
		Endpoint:  "http://" + addr,
		Addr:      addr,
		AccessKey: "af" + randHex(8),
		SecretKey: randHex(20),
		Bucket:    "agentflow-test",
		Region:    "us-east-1",
		DataDir:   filepath.Join(dir, "data"),
	}
	m.p = &process{
		name: "minio",
		bin:  bin,
		args: []string{"server", "--quiet", "--address", addr, "--console-address", console,
			"--certs-dir", filepath.Join(dir, "certs"), m.DataDir},
		env: []string{
			"MINIO_ROOT_USER=" + m.AccessKey,
			"MINIO_ROOT_PASSWORD=" + m.SecretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			"MINIO_REGION=" + m.Region,
		},
		logPath:  filepath.Join(dir, "minio.log"),
		readyURL: m.Endpoint + "/minio/health/ready",
	}
	m.t = t
	m.p.start(t)
	t.Cleanup(m.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), ServerReadyTimeout)
	defer cancel()
	if err := m.Client(t).MakeBucket(ctx, m.Bucket, minio.MakeBucketOptions{Region: m.Region}); err != nil {
		t.Fatalf("minio: make bucket %s: %v\n%s", m.Bucket, err, m.p.logTail())
	}
	return m
}

// Client is a minio-go client with the root credentials, for test setup
// and inspection behind the store's back.
func (m *MinIOServer) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(m.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(m.AccessKey, m.SecretKey, ""),
		Region: m.Region,
	})
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return c
}

// Env is the AWS_* variables that point objstore.Open (and a worker
// process) at this server.
func (m *MinIOServer) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + m.Endpoint,
		"AWS_ACCESS_KEY_ID=" + m.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + m.SecretKey,
		"AWS_REGION=" + m.Region,
	}
}

// Getenv looks up Env, for objstore.Open's getenv argument.
func (m *MinIOServer) Getenv(name string) string { return envMap(m.Env())(name) }

// StoreURL is the --store value for the bucket under prefix.
func (m *MinIOServer) StoreURL(prefix string) string {
	if prefix == "" {
		return "s3://" + m.Bucket
	}
	return "s3://" + m.Bucket + "/" + prefix
}

// Stop stops the server (an outage); Start brings it back with the same
// address and data. Stop is idempotent and runs at the end of the test.
func (m *MinIOServer) Stop() { m.p.stop() }

// Start restarts a stopped server on the same port and data directory
// and waits until it is ready; a failure fails the test MinIO was started
// for (call it from that test's goroutine).
func (m *MinIOServer) Start() {
	m.t.Helper()
	m.p.start(m.t)
}

// Log is the tail of the server's log, for failure messages.
func (m *MinIOServer) Log() string { return m.p.logTail() }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
