// Package certreload serves a TLS certificate that follows its files:
// when the certificate or key file changes on disk (a renewal), new
// handshakes get the new pair without a restart and without dropping
// established connections (docs/operations.md "TLS": the certificate and key
// are reloaded when their files change).
//
// # Basics
//
// GetCertificate is plugged into tls.Config (GetClientCertificate for a
// client certificate). At most once per CheckEvery it stats both files;
// when either one's size or modification time changed it loads the pair
// again. A pair that fails to load (a renewal
// caught half-written, a key that does not match) is reported through
// OnError and the previous certificate keeps serving; the next check tries
// again. There is no goroutine: the handshake path does the cheap stat.
package certreload

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Options configures a Reloader.
type Options struct {
	CertFile, KeyFile string
	// CheckEvery bounds how often the files are stat'ed (default 1s).
	CheckEvery time.Duration
	Clock      func() time.Time         // default time.Now
	OnError    func(err error)          // optional; a failed reload (old pair stays)
	OnReload   func(notAfter time.Time) // optional; a new pair is serving
}

type stamp struct {
	size int64
	mod  time.Time
}

// Reloader holds the current certificate.
type Reloader struct {
	o Options

	mu        sync.Mutex
	cert      *tls.Certificate // guarded by mu
	certStamp stamp            // guarded by mu
	keyStamp  stamp            // guarded by mu
	checked   time.Time        // guarded by mu
}

// New loads the pair once; an error here is a start-up error.
func New(o Options) (*Reloader, error) {
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	r := &Reloader{o: o}
	cs, ks, err := r.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("certreload: load key pair: %w", err)
	}
	r.cert, r.certStamp, r.keyStamp, r.checked = &cert, cs, ks, o.Clock()
	return r, nil
}

func (r *Reloader) stamps() (cert, key stamp, err error) {
	ci, err := os.Stat(r.o.CertFile)
	if err != nil {
		return stamp{}, stamp{}, fmt.Errorf("certreload: %w", err)
	}
	ki, err := os.Stat(r.o.KeyFile)
	if err != nil {
		return stamp{}, stamp{}, fmt.Errorf("certreload: %w", err)
	}
	return stamp{ci.Size(), ci.ModTime()}, stamp{ki.Size(), ki.ModTime()}, nil
}

// GetCertificate implements tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Clock()
	if now.Sub(r.checked) >= r.o.CheckEvery {
		r.checked = now
		r.reloadLocked()
	}
	return r.cert, nil
}

// GetClientCertificate implements tls.Config.GetClientCertificate, for a
// client certificate that follows its files the same way (the node's
// control-plane mTLS certificate).
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.GetCertificate(nil)
}

// reloadLocked loads the pair when its files changed. r.mu is held.
func (r *Reloader) reloadLocked() {
	cs, ks, err := r.stamps()
	if err != nil {
		r.fail(err)
		return
	}
	if cs == r.certStamp && ks == r.keyStamp {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.o.CertFile, r.o.KeyFile)
	if err != nil {
		r.fail(fmt.Errorf("certreload: load key pair (previous certificate stays): %w", err))
		return
	}
	r.cert, r.certStamp, r.keyStamp = &cert, cs, ks
	if r.o.OnReload != nil && cert.Leaf != nil {
		r.o.OnReload(cert.Leaf.NotAfter)
	}
}

func (r *Reloader) fail(err error) {
	if r.o.OnError != nil {
		r.o.OnError(err)
	}
}
