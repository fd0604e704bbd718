package snapshot

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/scootgate/scootgate/internal/certreload"
	"github.com/scootgate/scootgate/internal/config"
)

// ConfigHTTPOptions builds the options of http(s) sources from the node's
// [control_plane]: the bearer token, the CA bundle (which replaces the
// system roots: a control plane on a private CA should not also be
// reachable through any public one), the client certificate for mutual
// TLS, and the long poll. The CA bundle is read now. The client
// certificate follows its files (internal/certreload): a renewed pair is
// presented from the next connection on, and a pair that fails to load is
// logged to log (nil: discarded) while the previous one stays in use.
func ConfigHTTPOptions(cp config.ControlPlane, log *slog.Logger) (HTTPOptions, error) {
	return configHTTPOptions(cp, log, time.Now)
}

func configHTTPOptions(cp config.ControlPlane, log *slog.Logger, clk func() time.Time) (HTTPOptions, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := HTTPOptions{Token: cp.Token, LongPoll: cp.LongPoll, Silence: cp.LongPollSilence}
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
		r, err := certreload.New(certreload.Options{
			CertFile: cp.ClientCertFile, KeyFile: cp.ClientKeyFile, Clock: clk,
			OnError: func(err error) {
				log.Error("control-plane client certificate not reloaded; the previous one stays in use", "error", err)
			},
			OnReload: func(notAfter time.Time) {
				log.Info("control-plane client certificate reloaded", "not_after", notAfter)
			},
		})
		if err != nil {
			return HTTPOptions{}, fmt.Errorf("snapshot: control_plane.client_cert_file: %w", err)
		}
		o.TLS.GetClientCertificate = r.GetClientCertificate
	}
	return o, nil
}
