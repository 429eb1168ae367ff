package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Load returns the TLS configuration of the files: the CA pool (the
// system's without CAFile), the client certificate, the server name. A nil
// TLSFiles gives the defaults (system roots, no client certificate).
func (t *TLSFiles) Load() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t == nil {
		return c, nil
	}
	c.ServerName = t.ServerName
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("cert_file and key_file go together: set both or neither")
	}
	return c, nil
}
