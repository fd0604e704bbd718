package snapshot

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/scootgate/scootgate/internal/config"
)

// ConfigHTTPOptions builds the options of http(s) sources from the node's
// [control_plane]: the bearer token, the CA bundle (which replaces the
// system roots: a control plane on a private CA should not also be
// reachable through any public one), the client certificate for mutual
// TLS, and the long poll. Files are read now; a rotated client certificate
// takes effect at the next start.
func ConfigHTTPOptions(cp config.ControlPlane) (HTTPOptions, error) {
	o := HTTPOptions{Token: cp.Token, LongPoll: cp.LongPoll}
	if cp.CAFile == "" && cp.ClientCertFile == "" {
		return o, nil
	}
	o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if cp.CAFile != "" {
		pem, err := os.ReadFile(cp.CAFile)
		if err != nil {
			return HTTPOptions{}, fmt.Errorf("snapshot: control_plane.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return HTTPOptions{}, fmt.Errorf("snapshot: control_plane.ca_file %s holds no PEM certificate", cp.CAFile)
		}
		o.TLS.RootCAs = pool
	}
	if cp.ClientCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cp.ClientCertFile, cp.ClientKeyFile)
		if err != nil {
			return HTTPOptions{}, fmt.Errorf("snapshot: control_plane.client_cert_file: %w", err)
		}
		o.TLS.Certificates = []tls.Certificate{cert}
	}
	return o, nil
}
