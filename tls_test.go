package baton_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// writeCert makes a certificate signed by parent (self-signed when nil),
// writes it and its key as PEM into dir and returns it.
func writeCert(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

// A queue Redis that speaks only TLS and asks for client certificates: a
// replica with the CA and a client certificate in redis.tls runs its jobs;
// without the client certificate it cannot connect, and says so.
func TestRedisOverTLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	ca, caKey := writeCert(t, dir, "ca", &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	writeCert(t, dir, "server", &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)
	writeCert(t, dir, "client", &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "baton"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	redistest.New(t, redistest.WithArgs("--tls-port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "yes"))
	load := func(tlsBlock string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte(fmt.Sprintf(`redis:
  url: rediss://127.0.0.1:%d/0
  tls: {%s}
locking: {fresh_deployment: true}
namespace: tls
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    handler: {name: beat}
`, port, tlsBlock)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ran := make(chan jobs.Run, 16)
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(_ context.Context, run jobs.Run) error { ran <- run; return nil }); err != nil {
		t.Fatal(err)
	}
	cfg := load(fmt.Sprintf("ca_file: %q, cert_file: %q, key_file: %q", filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")))
	r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID("tls-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case run := <-ran:
		if run.Fence <= 0 {
			t.Errorf("a run over TLS without a fence: %+v", run)
		}
	case <-time.After(20 * time.Second):
		t.Error("no run over TLS in 20s")
	}
	stop()
	if err := <-done; err != nil && ctx.Err() == nil {
		t.Error(err)
	}

	// the CA but no client certificate: the server refuses, Start says so
	noCert, err := baton.New(load(fmt.Sprintf("ca_file: %q", filepath.Join(dir, "ca.pem"))), baton.WithHandlers(reg))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = noCert.Start(sctx)
	noCert.Close()
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("Start without a client certificate: %v", err)
	}
	// bad files are config errors naming the field
	if _, err := config.Load([]byte(fmt.Sprintf("redis: {url: \"rediss://127.0.0.1:%d/0\", tls: {ca_file: %q}}\njobs: []\n", port, filepath.Join(dir, "nope.pem")))); err == nil || !strings.Contains(err.Error(), "redis.tls") {
		t.Errorf("a missing ca_file: %v", err)
	}
}
