package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/protocol"
	"github.com/scootgate/scootgate/internal/protocol/anthropic"
	"github.com/scootgate/scootgate/internal/protocol/openai"
	"github.com/scootgate/scootgate/internal/routes"
)

// modelPrefix starts GET /v1/models/{id}.
const modelPrefix = "/v1/models/"

// modelsRequest authenticates a GET on the model list or one model and
// loads the table; it answers the failure itself.
func (h *Handler) modelsRequest(w http.ResponseWriter, r *http.Request, shape protocol.Protocol, rid string) (func(string) bool, *routes.Table, bool) {
	if r.Method != http.MethodGet {
		apierr.MethodNotAllowed("use GET").Write(w, shape, rid)
		return nil, nil, false
	}
	principal, ok := h.authenticate(w, r, shape, rid)
	if !ok {
		return nil, nil, false
	}
	table := h.o.Routes.Load()
	if table == nil {
		apierr.Unavailable("routes are not loaded yet", time.Second).Write(w, shape, rid)
		return nil, nil, false
	}
	return principal.Allows, table, true
}

// serveModels lists the public models the key may use: the models with an
// Anthropic target in the Anthropic shape when the request carries
// anthropic-version, those with an OpenAI target in the OpenAI shape
// otherwise (docs/api.md "Client surface details").
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request, shape protocol.Protocol, rid string) {
	allows, table, ok := h.modelsRequest(w, r, shape, rid)
	if !ok {
		return
	}
	var body any
	if shape == protocol.Anthropic {
		var names []string
		for _, n := range table.Names(protocol.Anthropic) {
			if allows(n) {
				names = append(names, n)
			}
		}
		page, more, aerr := anthropicPage(names, r)
		if aerr != nil {
			aerr.Write(w, shape, rid)
			return
		}
		list := anthropic.ModelList{Data: make([]anthropic.Model, 0, len(page)), HasMore: more}
		created := h.started.UTC().Format(time.RFC3339)
		for _, n := range page {
			list.Data = append(list.Data, anthropic.NewModel(n, created))
		}
		if len(page) > 0 {
			list.FirstID, list.LastID = &page[0], &page[len(page)-1]
		}
		body = list
	} else {
		list := openai.ModelList{Object: "list", Data: []openai.Model{}}
		for _, n := range table.Names(protocol.OpenAI) {
			if allows(n) {
				list.Data = append(list.Data, openai.NewModel(n, h.started.Unix()))
			}
		}
		body = list
	}
	h.writeJSON(w, shape, rid, body)
}

// serveModel answers GET /v1/models/{id} in the shape serveModels would
// list it, or 404 in that shape when the list would not hold it: an
// unknown model, one without a target of the shape's protocol, or one the
// key may not use (the answer does not tell the last apart).
//
// name comes from the request's decoded path, so a model name with "/"
// (which the SDKs escape as %2F) is found.
func (h *Handler) serveModel(w http.ResponseWriter, r *http.Request, shape protocol.Protocol, rid, name string) {
	allows, table, ok := h.modelsRequest(w, r, shape, rid)
	if !ok {
		return
	}
	m, found := table.Model(name)
	if !found || !allows(name) || !m.Serves(shape) {
		apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", name)).Write(w, shape, rid)
		return
	}
	if shape == protocol.Anthropic {
		h.writeJSON(w, shape, rid, anthropic.NewModel(name, h.started.UTC().Format(time.RFC3339)))
		return
	}
	h.writeJSON(w, shape, rid, openai.NewModel(name, h.started.Unix()))
}

func (h *Handler) writeJSON(w http.ResponseWriter, shape protocol.Protocol, rid string, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		(&apierr.Error{Status: 500, Msg: "could not encode the answer"}).Write(w, shape, rid)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// anthropicPage applies the Anthropic list parameters limit (1..1000,
// default 20), after_id and before_id to sorted names.
func anthropicPage(names []string, r *http.Request) ([]string, bool, *apierr.Error) {
	q := r.URL.Query()
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return nil, false, apierr.BadRequest("invalid_limit", "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	lo, hi := 0, len(names)
	if after := q.Get("after_id"); after != "" {
		for lo < hi && names[lo] <= after {
			lo++
		}
	}
	if before := q.Get("before_id"); before != "" {
		for hi > lo && names[hi-1] >= before {
			hi--
		}
		if hi-lo > limit {
			return names[hi-limit : hi], true, nil
		}
		return names[lo:hi], false, nil
	}
	if hi-lo > limit {
		return names[lo : lo+limit], true, nil
	}
	return names[lo:hi], false, nil
}
