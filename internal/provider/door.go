package provider

import (
	"net/http"
	"net/url"
	"time"
)

// Door is one more client-facing shape of an endpoint: the path and
// envelope in which a cloud platform's own clients send the protocol
// (docs/api.md "Cloud client paths"). A request that comes in through a
// door is made the protocol's own request at the entrance (Request) and
// is then served like any other, by any target of the endpoint; its answer
// goes back in the door's framing (Writer). The edits a door makes are the
// fixed set its platform's envelope implies (the model between path and
// body, the version member, the beta header), never a conversion. Every
// function field is safe for concurrent use and keeps none of its
// arguments.
type Door struct {
	// Platform is the platform whose clients send this shape.
	Platform Platform
	// Match reads a client path, as sent (escaped: a door decides which of
	// its segments may be percent-encoded, and refuses the rest): the
	// public model it names, whether it asks for a stream, and ok false
	// when the path is not this door's. A path that is this door's but
	// malformed (a doubly encoded model id) is a *BodyError, with ok true.
	Match func(escapedPath string) (model string, stream bool, ok bool, err *BodyError)
	// Query, when set, checks the client's query on the door's path (a
	// platform's API version): the query is the client's view and is
	// never forwarded.
	Query func(q url.Values) *BodyError
	// Request makes the client's body (and headers, edited in place) the
	// endpoint's own request for model: what its Spec.Inspect reads. It
	// returns the body and the model to hand Inspect as the path's model
	// ("" when the body now names it).
	Request func(body []byte, model string, stream bool, h http.Header) (out []byte, pathModel string, err *BodyError)
	// Writer wraps the client's response writer: what the request path
	// writes in the protocol's own framing (error documents, SSE streams)
	// reaches the client in the door's. Finish must be called once the
	// handler is done writing.
	Writer func(w http.ResponseWriter) DoorWriter
	// MissingKey, when set, is the message of the 401 that a request
	// through this door without a usable client key gets: how the
	// platform's clients send one, read from what they sent instead (h,
	// the request's headers). Nil: the endpoint's own message.
	MissingKey func(h http.Header) string
}

// DoorWriter is a response writer that re-frames an answer for a Door.
// A writer that holds output back (an error document to rewrite, a
// partial stream event) flushes it on FlushError and writes the rest on
// Finish.
type DoorWriter interface {
	http.ResponseWriter
	FlushError() error
	Unwrap() http.ResponseWriter
	// Finish writes what is held back; the answer is complete after it.
	Finish() error
}

// PlainDoorWriter is the writer of a door whose answers are the
// protocol's own: everything passes unchanged.
func PlainDoorWriter(w http.ResponseWriter) DoorWriter { return plainDoorWriter{w} }

type plainDoorWriter struct{ http.ResponseWriter }

func (p plainDoorWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
func (p plainDoorWriter) FlushError() error {
	return http.NewResponseController(p.ResponseWriter).Flush()
}
func (plainDoorWriter) Finish() error { return nil }

// ModelsDoor is a cloud platform's own listing of the models a client may
// ask for, answered from the public models of the API's protocol that the
// key may use (docs/api.md "Cloud client paths"): what the platform's
// clients ask before their first request.
type ModelsDoor struct {
	// Platform is the platform whose clients ask.
	Platform Platform
	// Path is the GET path, matched exactly (the query is List's).
	Path string
	// List renders the answer: names are the public models of the API's
	// protocol the key may use, sorted; query holds the listing's
	// parameters; created is when the node started. A parameter out of
	// range is a BodyError.
	List func(names []string, query url.Values, created time.Time) ([]byte, *BodyError)
	// Writer and MissingKey are as for a Door: the refusals go back in
	// the platform's shape.
	Writer     func(w http.ResponseWriter) DoorWriter
	MissingKey func(h http.Header) string
}
