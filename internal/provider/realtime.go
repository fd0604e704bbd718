package provider

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// RealtimeSpec is how an endpoint's sessions are relayed (docs/api.md
// "Realtime sessions"): the client opens a WebSocket at the endpoint's
// path, the node opens one to the target at its UpstreamPath, and every
// frame goes across both ways, each looked at by the functions here.
// Every function is safe for concurrent use and keeps none of its
// arguments.
type RealtimeSpec struct {
	// Model reads the public model the upgrade asks for from its query.
	Model func(q url.Values) (string, *BodyError)
	// Key returns a client key the upgrade carries where the headers
	// authz reads do not (a browser cannot set Authorization on a
	// WebSocket: OpenAI's browser SDK sends the key as a subprotocol);
	// "" when there is none.
	Key func(h http.Header) string
	// Subprotocols are the subprotocols the node accepts from a client,
	// the preferred first. A key carried as a subprotocol is never one.
	Subprotocols []string
	// Header builds the provider handshake's headers from the client's
	// upgrade: the allowlisted ones and the backend's credential.
	Header func(client http.Header, credential string) http.Header
	// Query is the provider URL's query for the target's provider model.
	Query func(providerModel string) string
	// ClientFrame looks at a client text frame before it is relayed.
	// public is the session's public model and model the target's
	// provider model as a JSON string. It returns the frame to send (frame
	// itself, or a copy with the model member rewritten), what kind of
	// event it is, and the client's event id (raw JSON, nil if none) for
	// an error event about it; or why it is refused.
	ClientFrame func(frame []byte, public string, model []byte) (out []byte, ev ClientEvent, err *BodyError)
	// ProviderFrame reads a provider text frame: what kind of event it is
	// and, for the end of a response, its usage.
	ProviderFrame func(frame []byte) ProviderEvent
	// ErrorEvent is the frame that tells the client of an error the node
	// found itself: typ is the error type, clientEvent the id of the
	// client event it is about (nil when none).
	ErrorEvent func(typ, code, msg string, clientEvent []byte) []byte
}

// ClientEvent is what a client frame of a realtime session is.
type ClientEvent struct {
	Kind ClientKind
	ID   []byte // the event's "event_id" as written; nil when absent
}

// ClientKind is the kind of a client event the node acts on.
type ClientKind uint8

const (
	ClientOther          ClientKind = iota
	ClientResponseCreate            // asks for a response: the key is judged again
	ClientSessionUpdate             // may name the model
)

// ProviderEvent is what a provider frame of a realtime session is.
type ProviderEvent struct {
	Kind ProviderKind
	// For ProviderResponseDone: the response's usage (Usage, Raw, and
	// HasUsage when there was one), and whether the response failed.
	Usage    usageevent.Usage
	Raw      json.RawMessage
	HasUsage bool
	Failed   bool
}

// ProviderKind is the kind of a provider event the node acts on.
type ProviderKind uint8

const (
	ProviderOther           ProviderKind = iota
	ProviderResponseCreated              // a response started
	ProviderResponseDone                 // a response ended, with its usage
)
