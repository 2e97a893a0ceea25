package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"sync"
	"testing"
)

// TLSFront listens on loopback with TLS (mutual TLS when mTLS is set: only
// clients with a certificate from p's CA get through) and forwards each
// connection's decrypted bytes to backend, a plaintext gRPC server such as
// the Temporal dev server: the test stands in for the TLS a production
// cluster's frontend (or a load balancer in front of it) terminates. It
// returns the address to dial; it stops with the test.
func TLSFront(t testing.TB, backend string, p *PKI, mTLS bool) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if mTLS {
		pem, err := os.ReadFile(p.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				// The handshake happens here, so a refused client never
				// reaches the backend.
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				b, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer b.Close()
				track(c, true)
				track(b, true)
				defer track(c, false)
				defer track(b, false)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
