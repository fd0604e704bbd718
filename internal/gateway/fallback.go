package gateway

import (
	"fmt"

	"github.com/scootgate/scootgate/internal/apierr"
	"github.com/scootgate/scootgate/internal/routes"
)

// ServedModelHeader names, on an answer served by a fallback, the public
// model whose target served it (docs/api.md "Headers"). An answer served
// by the model the request named has none.
const ServedModelHeader = "X-Scootgate-Served-Model"

// fallbackReason is why a model could not take a request before anything
// was sent, so that the next model of its chain served it
// (docs/routing.md "Fallbacks"): the metric's reason label and the
// request log's fallback. The set is closed, so the label is bounded.
type fallbackReason uint8

const (
	fallbackNone        fallbackReason = iota
	fallbackEndpoint                   // no target serves the endpoint
	fallbackCapability                 // no target offers what the request needs
	fallbackContext                    // no target holds the request (context window, output cap)
	fallbackNotSent                    // every target that could take it was tried, and nothing was sent
	fallbackAtCap                      // its targets that could take it were at their in-flight caps
	fallbackHeadroom                   // … out of rate-limit headroom
	fallbackUnavailable                // … held by their breakers, cooling down or disabled
	numFallbackReasons
)

var fallbackNames = [numFallbackReasons]string{
	fallbackNone:        "",
	fallbackEndpoint:    "endpoint",
	fallbackCapability:  "capability",
	fallbackContext:     "context",
	fallbackNotSent:     "not_sent",
	fallbackAtCap:       "at_cap",
	fallbackHeadroom:    "headroom",
	fallbackUnavailable: "unavailable",
}

func (r fallbackReason) String() string { return fallbackNames[r] }

// fallBack notes that the request's attempts go to the fallback model to
// from here on, because from, the model the request named, could not
// take it (why): the answer says so in its header, the usage events and
// the request log name to, and the metric counts it.
func (c *call) fallBack(from, to *routes.Model, why fallbackReason) {
	c.served, c.fallback = to, why
	c.w.Header().Set(ServedModelHeader, to.Name)
	c.h.o.Observer.ObserveFallback(from.Name, to.Name, why.String())
}

// servedModel is the public model whose target the attempts go to: the
// one the request named, or the fallback that serves it.
func (c *call) servedModel() string {
	if c.served != nil {
		return c.served.Name
	}
	return c.req.Model
}

// inputTokens estimates the request's input tokens without a tokenizer
// (docs/routing.md "Context windows"): a quarter of its JSON body's
// bytes. A multipart body (an audio or image upload) is media, not
// text: 0.
func (c *call) inputTokens() int64 {
	if c.spec.InspectForm != nil {
		return 0
	}
	return int64(len(c.body)) / 4
}

// usable returns the targets of x's pool for this request's endpoint that
// offer what it needs and hold it (docs/routing.md "Context windows"), or
// nil and why there are none. The pool itself is returned, without a
// copy, when every target holds the request or x declares no window;
// capability is left to the picker, as for a model without a chain.
func (c *call) usable(x *routes.Model) ([]*routes.Target, fallbackReason) {
	pool := x.Pools[c.spec.Endpoint]
	switch {
	case len(pool) == 0:
		return nil, fallbackEndpoint
	case !offers(pool, c.req.Need):
		return nil, fallbackCapability
	case !x.Windowed:
		return pool, fallbackNone
	}
	in, out := c.inputTokens(), c.req.MaxOutput
	var held []*routes.Target
	for i, t := range pool {
		switch {
		case !t.Holds(in, out):
			if held == nil {
				held = make([]*routes.Target, i, len(pool))
				copy(held, pool[:i])
			}
		case held != nil:
			held = append(held, t)
		}
	}
	switch {
	case held == nil:
		return pool, fallbackNone
	case !offers(held, c.req.Need):
		return nil, fallbackContext
	}
	// A tier that lost targets has another length than its weight
	// index, which the pickers then ignore (they scan the tier).
	return held, fallbackNone
}

// unavailable is why no target of pool could take the request when a
// pick found none (docs/routing.md "Fallbacks"): every target that offers
// what it needs was tried (not_sent); otherwise the first of at_cap,
// headroom and unavailable that some untried one shows.
func (c *call) unavailable(pool, tried []*routes.Target) fallbackReason {
	why := fallbackNotSent
	for _, t := range pool {
		if !t.Caps.Has(c.req.Need) || contains(tried, t) {
			continue
		}
		st := t.Backend.State
		v := st.View()
		r := fallbackUnavailable
		switch {
		case v.InFlight >= v.Cap:
			r = fallbackAtCap
		case !v.HeadroomUntil.IsZero() || !st.Fits(c.tokens):
			r = fallbackHeadroom
		}
		if why == fallbackNotSent || r < why {
			why = r
		}
	}
	return why
}

func contains(list []*routes.Target, t *routes.Target) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

// refuseStatic answers the 400 of a request that no model of its chain
// can take whatever their state (docs/routing.md "Fallbacks"): the
// furthest reason met, naming the model the request named.
func (c *call) refuseStatic(why fallbackReason, shown string, chained bool) {
	also := ""
	if chained {
		also = ", nor does any of its fallbacks this key may use"
	}
	switch why {
	case fallbackEndpoint:
		// Not every provider of a protocol serves every endpoint: backends
		// declare theirs, and nothing is sent to one that does not.
		c.fail(apierr.BadRequest("endpoint_not_served", fmt.Sprintf("model %q has no backend that serves %s%s", shown, c.spec.Route(), also)))
	case fallbackCapability:
		c.fail(apierr.BadRequest("capability_not_offered", fmt.Sprintf("model %q offers no target with %s%s", shown, c.req.Need, also)))
	default:
		c.fail(apierr.BadRequest("context_length_exceeded", fmt.Sprintf(
			"model %q has no target that holds this request: about %d input tokens (estimated from its size) and %d output tokens asked for exceed every target's context window or output limit%s",
			shown, c.inputTokens(), c.req.MaxOutput, also)))
	}
}
