package app

import (
	"sync/atomic"
	"time"

	"github.com/scootgate/scootgate/internal/gateway"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/snapshot"
)

// Hooks let a caller follow the node's life without reading its log:
// tests wait on them instead of on log lines. Every func may be nil. Each
// is called synchronously by the goroutine that took the step, so it must
// return quickly and must not call back into the node.
type Hooks struct {
	// Draining is called once when the drain starts: /readyz already
	// fails, and drain.delay starts.
	Draining func()
	// GraceOver is called when drain.grace ended with requests still in
	// flight, just before they are cancelled.
	GraceOver func()
	// Snapshot is called for every routing or authorization document the
	// node decoded, once it is applied or rejected.
	Snapshot func(SnapshotEvent)
	// Request is called when a client request has been answered and its
	// attempts logged, with the endpoint ("chat_completions", "messages",
	// "models"), the status and the send state of its last attempt (""
	// when none was made).
	Request func(endpoint string, status int, sendState string)
	// Refused is called for every request refused before routing, after
	// its refusal line (if the rate limit let one through) was logged.
	Refused func(status int, reason string)
	// CredentialsChecked is called after each check of the file
	// credentials (Options.CredentialTicks).
	CredentialsChecked func()
}

// SnapshotEvent is one decoded snapshot document.
type SnapshotEvent struct {
	Name     string // the poller: "routes" or "authz"
	Version  uint64 // the document's version; 0 when it could not be decoded
	FromDisk bool   // restored from the last good copy at start
	// Err is nil when the document was applied, and says why it was
	// rejected otherwise (the previous document keeps serving).
	Err error
}

// hookedDecoder reports each document decode sees to h.Snapshot. Rules
// the poller applies after decoding (such as rollback) are not reported.
type hookedDecoder struct {
	name     string
	decode   snapshot.DecodeFunc
	hook     func(SnapshotEvent)
	fromDisk atomic.Bool // set while the poller restores from disk
}

func (d *hookedDecoder) Decode(data []byte) (uint64, func() error, error) {
	version, apply, err := d.decode(data)
	if err != nil {
		d.hook(SnapshotEvent{Name: d.name, FromDisk: d.fromDisk.Load(), Err: err})
		return version, apply, err
	}
	return version, func() error {
		err := apply()
		d.hook(SnapshotEvent{Name: d.name, Version: version, FromDisk: d.fromDisk.Load(), Err: err})
		return err
	}, nil
}

// hookedObserver passes the request path's measurements on and reports
// each answered request to a Request hook.
type hookedObserver struct {
	gateway.Observer
	request func(endpoint string, status int, sendState string)
}

func (o hookedObserver) ObserveRequest(endpoint provider.Endpoint, status int, sendState provider.SendState, d time.Duration, stream bool) {
	o.Observer.ObserveRequest(endpoint, status, sendState, d, stream)
	state := ""
	if sendState != provider.NoAttempt {
		state = sendState.String()
	}
	o.request(endpoint.String(), status, state)
}

func (o hookedObserver) ObserveModels(status int, d time.Duration) {
	o.Observer.ObserveModels(status, d)
	o.request(metrics.EndpointModels, status, "")
}
