package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
)

// modelsRequest authenticates a GET on the model list or one model and
// loads the table; it answers the failure itself. missingKey is as for
// authenticateDoor.
func (h *Handler) modelsRequest(w http.ResponseWriter, r *http.Request, api *provider.API, rid string, missingKey func(http.Header) string) (func(string) bool, *routes.Table, bool) {
	if r.Method != http.MethodGet {
		apierr.MethodNotAllowed("use GET").Write(w, api, rid)
		return nil, nil, false
	}
	principal, ok := h.authenticateDoor(w, r, api, rid, missingKey)
	if !ok {
		return nil, nil, false
	}
	table := h.o.Routes.Load()
	if table == nil {
		apierr.Unavailable("routes are not loaded yet", time.Second).Write(w, api, rid)
		return nil, nil, false
	}
	return principal.Allows, table, true
}

// serveModels lists the public models the key may use that have a target
// of the API the request's client speaks (docs/api.md "Client surface
// details"), in that API's shape and with its paging.
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request, api *provider.API, rid string) {
	allows, table, ok := h.modelsRequest(w, r, api, rid, nil)
	if !ok {
		return
	}
	var names []string
	for _, n := range table.Names(api.Protocol) {
		if allows(n) {
			names = append(names, n)
		}
	}
	body, berr := api.ListModels(names, r.URL.Query(), h.started)
	if berr != nil {
		apierr.BadRequest(berr.Code, berr.Msg).Write(w, api, rid)
		return
	}
	writeJSON(w, body)
}

// serveModel answers GET /v1/models/{id} in the shape serveModels would
// list it, or 404 in that shape when the list would not hold it: an
// unknown model, one without a target of the API's protocol, or one the
// key may not use (the answer does not tell the last apart).
//
// name comes from the request's decoded path, so a model name with "/"
// (which the SDKs escape as %2F) is found.
func (h *Handler) serveModel(w http.ResponseWriter, r *http.Request, api *provider.API, rid, name string) {
	allows, table, ok := h.modelsRequest(w, r, api, rid, nil)
	if !ok {
		return
	}
	m, found := table.Model(name)
	if !found || !allows(name) || !m.Serves(api.Protocol) {
		apierr.NotFound("model_not_found", fmt.Sprintf("model %q does not exist", withoutKey(name, r))).Write(w, api, rid)
		return
	}
	writeJSON(w, api.GetModel(name, h.started))
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// serveModelsDoor answers a platform's own model listing (docs/api.md
// "Cloud client paths"): the public models of the API's protocol the key
// may use, in the platform's shape, refusals included.
func (h *Handler) serveModelsDoor(w *statusWriter, r *http.Request, md modelsDoor, rid string) {
	dw := md.door.Writer(w.ResponseWriter)
	w.ResponseWriter = dw
	defer finishDoor(dw)
	api := md.api
	allows, table, ok := h.modelsRequest(w, r, api, rid, md.door.MissingKey)
	if !ok {
		return
	}
	var names []string
	for _, n := range table.Names(api.Protocol) {
		if allows(n) {
			names = append(names, n)
		}
	}
	body, berr := md.door.List(names, r.URL.Query(), h.started)
	if berr != nil {
		apierr.BadRequest(berr.Code, berr.Msg).Write(w, api, rid)
		return
	}
	writeJSON(w, body)
}
