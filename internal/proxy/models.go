package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/routes"
)

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type openAIModelList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

// serveModels lists the public models the key may use: the Anthropic pool
// in the Anthropic shape when the request carries anthropic-version, the
// OpenAI pool in the OpenAI shape otherwise (SPEC §1, §11).
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request, rid string) {
	shape := shapeFor(r)
	if r.Method != http.MethodGet {
		apierr.MethodNotAllowed("use GET").Write(w, shape, rid)
		return
	}
	principal, ok := h.authenticate(w, r, shape, rid)
	if !ok {
		return
	}
	table := h.o.Routes.Load()
	if table == nil {
		apierr.Unavailable("routes are not loaded yet", time.Second).Write(w, shape, rid)
		return
	}
	var body any
	if shape == apierr.Anthropic {
		var names []string
		for _, n := range table.Names(routes.Anthropic) {
			if principal.Allows(n) {
				names = append(names, n)
			}
		}
		page, more, aerr := anthropicPage(names, r)
		if aerr != nil {
			aerr.Write(w, shape, rid)
			return
		}
		list := anthropicModelList{Data: make([]anthropicModel, 0, len(page)), HasMore: more}
		created := h.started.UTC().Format(time.RFC3339)
		for _, n := range page {
			list.Data = append(list.Data, anthropicModel{Type: "model", ID: n, DisplayName: n, CreatedAt: created})
		}
		if len(page) > 0 {
			list.FirstID, list.LastID = &page[0], &page[len(page)-1]
		}
		body = list
	} else {
		list := openAIModelList{Object: "list", Data: []openAIModel{}}
		for _, n := range table.Names(routes.OpenAI) {
			if principal.Allows(n) {
				list.Data = append(list.Data, openAIModel{ID: n, Object: "model", Created: h.started.Unix(), OwnedBy: "scootgate"})
			}
		}
		body = list
	}
	data, err := json.Marshal(body)
	if err != nil {
		(&apierr.Error{Status: 500, Msg: "could not encode the model list"}).Write(w, shape, rid)
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
