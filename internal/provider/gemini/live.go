package gemini

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// LivePath is where the Gemini API serves Live sessions: a WebSocket at
// the host's root, outside the versioned REST paths.
const LivePath = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"

// Live is a Gemini Live session (docs/api.md "Gemini Live"): GET
// LivePath with Upgrade: websocket, the client key in x-goog-api-key
// (Google's Gen AI SDK for Go) or ?key= (browsers and raw clients). The
// client's first message is {"setup":{"model":"models/…",…}}: the model
// is there, not in the URL, so the node accepts the upgrade, reads that
// message, routes, and sends it on naming the target's model. Then both
// sides exchange JSON messages (the client's clientContent,
// realtimeInput, toolResponse; the server's setupComplete,
// serverContent, toolCall, usageMetadata, goAway), relayed unchanged but
// for a later setup's model. Google's server sends its messages as binary
// frames, which the node reads like text. The API has no error message:
// Google ends a session over an error with a close code and the reason,
// and so does the node (liveClose).
var Live = &provider.Spec{
	Endpoint:     provider.BidiGenerateContent,
	Method:       http.MethodGet,
	Path:         LivePath,
	UpstreamPath: LivePath,
	Header:       Header,
	BodyUsage:    provider.NoUsage,
	Inspect:      inspectLiveBody,
	Realtime: &provider.RealtimeSpec{
		SetupModel:    LiveSetupModel,
		Named:         true,
		Binary:        true,
		Path:          livePath,
		Key:           func(http.Header) string { return "" },
		Header:        liveHeader,
		Query:         func(string) string { return "" },
		ClientFrame:   LiveClientFrame,
		ProviderFrame: LiveProviderFrame,
		ErrorEvent:    liveErrorEvent,
		Close:         liveClose,
	},
}

// inspectLiveBody refuses every body: a Live session has none.
func inspectLiveBody([]byte, string) (provider.Request, *provider.BodyError) {
	return provider.Request{}, provider.Problemf("invalid_request", "a Live session is a WebSocket: GET "+LivePath+" with Upgrade: websocket")
}

// livePath is the provider socket's path from the backend's: a Gemini
// base_url ends in the API version (…/v1beta), under which the REST
// methods are; the socket is at the same prefix without it.
func livePath(upstream string) string {
	prefix, ok := strings.CutSuffix(upstream, LivePath)
	if !ok {
		return upstream
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		prefix = prefix[:i]
	}
	return prefix + LivePath
}

// liveHeader is the provider handshake's headers: User-Agent and
// X-Goog-Api-Client from the client, and the credential as
// x-goog-api-key (as Google's Gen AI SDK for Go connects).
func liveHeader(client http.Header, credential string) http.Header {
	h := make(http.Header, 3)
	for _, k := range [...]string{"User-Agent", "X-Goog-Api-Client"} {
		if v := client[k]; len(v) > 0 {
			h[k] = v
		}
	}
	h.Set("X-Goog-Api-Key", credential)
	return h
}

const modelsPrefix = "models/"

// LiveSetupModel reads the public model of a session from its first
// client message (provider.RealtimeSpec.SetupModel): a JSON object whose
// "setup" member, an object, names "model" as "models/{model}". "setup"
// and "setup.model" must each appear once, in their exact spelling (a
// provider that reads the last of two, or matches names in any letter
// case, must read what the node read).
func LiveSetupModel(frame []byte) (string, *provider.BodyError) {
	setup, _, _, berr := liveMembers(frame)
	if berr != nil {
		return "", berr
	}
	if setup == nil {
		return "", provider.Problemf("setup_required", `the first message of a session must be {"setup":{"model":"models/…"}}`)
	}
	if !provider.Object(setup) {
		return "", provider.Problemf("invalid_request", `"setup" must be an object`)
	}
	raw, _, berr := setupModel(setup)
	switch {
	case berr != nil:
		return "", berr
	case raw == nil:
		return "", provider.Problemf("missing_model", `"setup" must name a model: "model": "models/…"`)
	}
	name, ok := jsonedit.Unquote(raw)
	model, prefixed := strings.CutPrefix(name, modelsPrefix)
	if !ok || !prefixed || model == "" {
		return "", provider.Problemf("invalid_model", `setup.model must be a string "models/{model}"`)
	}
	return model, nil
}

// liveMembers reads the top-level members of a client message that the
// node acts on: setup (nil when absent) and where its value starts, and
// whether it carries clientContent (Google's JSON reader also takes the
// proto field name, client_content).
func liveMembers(frame []byte) (setup []byte, at int, content bool, berr *provider.BodyError) {
	it, err := jsonedit.Members(frame)
	if err != nil {
		return nil, 0, false, provider.Problemf("invalid_json", "a message must be a JSON object")
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return nil, 0, false, provider.Problemf("invalid_json", "a message must be a JSON object")
		}
		if !ok {
			return setup, at, content, nil
		}
		switch {
		case m.KeyIs("setup"):
			if setup != nil {
				return nil, 0, false, provider.Problemf("duplicate_member", `member "setup" appears more than once`)
			}
			setup, at = m.Value, m.At
		case m.KeyLike("setup"):
			return nil, 0, false, provider.Problemf("duplicate_member", `member "setup" appears in another letter case`)
		case m.KeyIs("clientContent"), m.KeyIs("client_content"):
			content = true
		}
	}
}

// setupModel finds setup's model member: its value and where that value
// is in setup; nil when there is none.
func setupModel(setup []byte) (raw []byte, at int, berr *provider.BodyError) {
	it, err := jsonedit.Members(setup)
	if err != nil {
		return nil, 0, provider.Problemf("invalid_json", "a message must be a JSON object")
	}
	for {
		m, ok, err := it.Next()
		if err != nil {
			return nil, 0, provider.Problemf("invalid_json", "a message must be a JSON object")
		}
		if !ok {
			return raw, at, nil
		}
		switch {
		case m.KeyIs("model"):
			if raw != nil {
				return nil, 0, provider.Problemf("invalid_model", `member "setup.model" appears more than once`)
			}
			raw, at = m.Value, m.At
		case m.KeyLike("model"):
			return nil, 0, provider.Problemf("invalid_model", `member "setup.model" appears in another letter case`)
		}
	}
}

// LiveClientFrame reads a client message (provider.RealtimeSpec.ClientFrame).
// A setup message must name the session's model ("models/" + public),
// and the copy sent names model (the target's, a JSON string
// "models/…") in its place, every other byte the client's. A
// clientContent message asks for a turn: the key is judged again
// (provider.ClientResponseCreate). Gemini's messages carry no id.
func LiveClientFrame(frame []byte, public string, model []byte) ([]byte, provider.ClientEvent, *provider.BodyError) {
	var ev provider.ClientEvent
	setup, setupAt, content, berr := liveMembers(frame)
	switch {
	case berr != nil:
		return nil, ev, berr
	case setup == nil:
		if content {
			ev.Kind = provider.ClientResponseCreate
		}
		return frame, ev, nil
	}
	ev.Kind = provider.ClientSessionUpdate
	if !provider.Object(setup) {
		return nil, ev, provider.Problemf("invalid_request", `"setup" must be an object`)
	}
	raw, at, berr := setupModel(setup)
	switch {
	case berr != nil:
		return nil, ev, berr
	case raw == nil:
		return frame, ev, nil
	}
	if name, ok := jsonedit.Unquote(raw); !ok || name != modelsPrefix+public {
		return nil, ev, provider.Problemf("invalid_model", "setup.model must name the model the session was opened with")
	}
	at += setupAt
	end := at + len(raw)
	out := make([]byte, 0, len(frame)-len(raw)+len(model))
	out = append(out, frame[:at]...)
	out = append(out, model...)
	return append(out, frame[end:]...), ev, nil
}

var (
	turnCompleteKey  = provider.NewKey("turnComplete")
	modelTurnKey     = provider.NewKey("modelTurn")
	usageMetadataKey = provider.NewKey("usageMetadata")
	liveUsageKeys    = [4]string{"promptTokenCount", "responseTokenCount", "cachedContentTokenCount", "thoughtsTokenCount"}
)

// LiveProviderFrame reads a server message (provider.RealtimeSpec.ProviderFrame).
// A turn starts with the first serverContent.modelTurn or toolCall and
// ends at the message that carries serverContent.turnComplete or
// usageMetadata (Google sends the turn's usage with its turnComplete);
// that message is the turn's end, with its usage:
//
//	input     promptTokenCount + toolUsePromptTokenCount
//	output    responseTokenCount (candidatesTokenCount where a server
//	          sends that instead) + thoughtsTokenCount
//	cache rd  cachedContentTokenCount
//	reasoning thoughtsTokenCount
//
// Google reports each turn's own usage, not a running total of the
// session's (its prompt counts grow with the context). Audio deltas cost
// a byte search for the two member names.
func LiveProviderFrame(frame []byte) provider.ProviderEvent {
	var pe provider.ProviderEvent
	it, err := jsonedit.Members(frame)
	if err != nil {
		return pe
	}
	deep := provider.MayHaveValue(frame, turnCompleteKey) || provider.MayHaveValue(frame, usageMetadataKey)
	var done bool
	var usage []byte
	for {
		m, ok, err := it.Next()
		if err != nil {
			return provider.ProviderEvent{}
		}
		if !ok {
			break
		}
		switch {
		case m.KeyIs("serverContent"):
			if deep {
				v, ok, _ := jsonedit.Lookup(m.Value, "turnComplete")
				done = done || (ok && string(v) == "true")
			}
			if provider.MayHaveValue(m.Value, modelTurnKey) {
				if _, ok, _ := jsonedit.Lookup(m.Value, "modelTurn"); ok {
					pe.Kind = provider.ProviderResponseCreated // the model's turn started
				}
			}
		case m.KeyIs("toolCall"):
			pe.Kind = provider.ProviderResponseCreated
		case m.KeyIs("usageMetadata"):
			done, usage = true, m.Value
		}
	}
	if !done {
		return pe
	}
	pe.Kind = provider.ProviderResponseDone
	if provider.Usable(usage) && !emptyObject(usage) { // {}: the turn was not counted
		pe.Usage = liveUsage(usage)
		pe.Raw, pe.HasUsage = json.RawMessage(bytes.Clone(usage)), true
	}
	return pe
}

// emptyObject reports whether obj, an object, has no member.
func emptyObject(obj []byte) bool {
	it, err := jsonedit.Members(obj)
	if err != nil {
		return false
	}
	_, ok, err := it.Next()
	return err == nil && !ok
}

// liveUsage normalizes a Live usageMetadata object.
func liveUsage(obj []byte) usageevent.Usage {
	v := provider.Lookup4(obj, liveUsageKeys)
	out := v[1]
	if out == nil {
		out, _, _ = jsonedit.Lookup(obj, "candidatesTokenCount")
	}
	thoughts := provider.Count(v[3])
	return provider.Clamp(usageevent.Usage{
		InputTokens:     provider.AddSat(provider.Count(v[0]), provider.Inner(obj, "toolUsePromptTokenCount")),
		OutputTokens:    provider.AddSat(provider.Count(out), thoughts),
		CacheReadTokens: provider.Count(v[2]),
		ReasoningTokens: thoughts,
	})
}

// liveGoAway is the message by which Google tells a client that the
// server will close the session (a drain): reconnect elsewhere.
var liveGoAway = []byte(`{"goAway":{"timeLeft":"0s"}}`)

// liveErrorEvent is the message before the node's close frame
// (provider.RealtimeSpec.ErrorEvent): goAway when the node drains, none
// otherwise (Gemini says errors in the close frame only).
func liveErrorEvent(_, code, _ string, _ []byte) []byte {
	if code == "node_shutting_down" {
		return liveGoAway
	}
	return nil
}

// liveClose is the close code of an error the node found
// (provider.RealtimeSpec.Close), as Google closes its own sessions:
// 1007 (invalid frame payload data) for a request it will not take (an
// invalid message, an invalid or revoked key), 1008 (policy violation)
// for a model not found or not allowed, 1011 (internal error) for a
// quota, an overload or a failure on the way; 1001 (going away) when the
// node drains and 1000 for the node's own session bounds.
func liveClose(status int, code string) int {
	switch code {
	case "node_shutting_down":
		return 1001
	case "session_idle", "session_expired":
		return 1000
	case "invalid_api_key":
		return 1007
	}
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized:
		return 1007
	case http.StatusForbidden, http.StatusNotFound:
		return 1008
	}
	return 1011
}
