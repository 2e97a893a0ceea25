package docker

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// egressCA is the CA of one sandbox's boundary: the proxy signs the leaf
// certificates of the hosts whose requests it adds headers to with it,
// and only that sandbox trusts it. Its key lives in the worker's memory
// and the proxy's, never on disk or in the sandbox.
type egressCA struct {
	certPEM, keyPEM []byte
}

// newEgressCA makes the CA of one execution. Its name constraints permit
// only the hosts of the rules that carry headers: even a leaked key signs
// for nothing else a client would accept.
func newEgressCA(id exechost.ExecutionID, rules []exechost.EgressRule, notAfter time.Time) (*egressCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("egress CA serial: %w", err)
	}
	var domains []string
	for _, r := range rules {
		d := strings.TrimPrefix(r.Host, "*.")
		if !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{Organization: []string{"agentflow egress"}, CommonName: "agentflow egress " + string(id)},
		NotBefore:                   now.Add(-time.Minute),
		NotAfter:                    notAfter.Add(time.Hour),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         domains,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	return &egressCA{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}

// egressRoots are the CAs a boundary trusts for upstreams: the worker's
// system roots plus the operator's (--egress-ca-file). The proxy verifies
// upstreams of terminated tunnels against them; the sandbox gets them too
// (its image may have none) to verify the upstreams it reaches itself.
type egressRoots struct {
	upstream []byte // PEM
}

// systemRootFiles are where Linux distributions keep the system roots, in
// the order crypto/x509 reads them.
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// loadEgressRoots reads the worker's system roots (SSL_CERT_FILE first,
// as crypto/x509 does) and appends extra, which must hold at least one
// certificate when given.
func loadEgressRoots(extra []byte) (egressRoots, error) {
	var buf bytes.Buffer
	files := systemRootFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			buf.Write(certsOnly(b))
			break
		}
	}
	if len(bytes.TrimSpace(extra)) > 0 {
		certs := certsOnly(extra)
		if len(certs) == 0 {
			return egressRoots{}, errors.New("egress CA file: no PEM certificate in it")
		}
		buf.Write(certs)
	}
	return egressRoots{upstream: buf.Bytes()}, nil
}

// certsOnly keeps the CERTIFICATE blocks of a PEM file that parse, so a
// bundle handed to a proxy or a sandbox never carries a key or junk.
func certsOnly(b []byte) []byte {
	var out bytes.Buffer
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out.Bytes()
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			continue
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})
	}
}
