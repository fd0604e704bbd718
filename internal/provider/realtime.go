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
	// Nil when the session's first client frame names the model instead
	// (SetupModel).
	Model func(q url.Values) (string, *BodyError)
	// SetupModel, set instead of Model, reads the public model from the
	// session's first client frame (Gemini Live's setup message). The node
	// then accepts the client's upgrade before it routes, so what it
	// refuses after that is a close frame (Close), not an HTTP answer.
	SetupModel func(frame []byte) (string, *BodyError)
	// Named says that frames name the model as "models/{model}": the
	// target's provider model reaches ClientFrame in that form.
	Named bool
	// Binary says that binary frames carry events too (Gemini Live's
	// server sends its JSON messages as binary frames): they are looked at
	// like text frames and relayed as binary frames.
	Binary bool
	// Path, when set, gives the provider socket's URL path from the
	// backend's (its base URL's path followed by the Spec's UpstreamPath).
	Path func(upstream string) string
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
	// client event it is about (nil when none). nil: the API has no such
	// frame for this error, and Close says it.
	ErrorEvent func(typ, code, msg string, clientEvent []byte) []byte
	// Close, when set, is the close code the node ends a session with
	// over an error it found itself, for an API that says its errors with
	// close codes and reasons (Gemini Live): code is the node's error code
	// (apierr's, or a realtime one such as session_idle), status the HTTP
	// status it stands for (0 for one found after the session opened).
	// The close reason is the error's message. A frame the node refuses
	// then ends the session. Nil: the node's own close codes (docs/api.md
	// "Realtime sessions"), and a refused frame leaves the session open.
	Close func(status int, code string) int
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
