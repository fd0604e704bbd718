package metrics

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// DefaultMaxModelSeries is the number of (public model, backend) pairs
// that get series of their own when Options.MaxModelSeries is 0. At about
// 42 series a pair it bounds the per-model families near 21,000 series.
const DefaultMaxModelSeries = 500

// ModelOther is the model label of the pairs beyond the bound: their
// measurements are added up per backend under this name.
const ModelOther = "_other"

// maxModelLabel is the longest model name exported as is, in runes, the
// longest public model name a route snapshot may have.
const maxModelLabel = 256

// Status classes of scootgate_model_requests_total.
type statusClass uint8

const (
	class2xx statusClass = iota
	class3xx
	class4xx
	class5xx
	classNone // nothing sent to the client by this attempt
	numClasses
)

var classNames = [numClasses]string{"2xx", "3xx", "4xx", "5xx", "none"}

// classOf maps the status an attempt sent to the client. 1xx is never
// final and cannot be an attempt's answer; it counts with none.
func classOf(status int) statusClass {
	switch status / 100 {
	case 2:
		return class2xx
	case 3:
		return class3xx
	case 4:
		return class4xx
	case 5:
		return class5xx
	}
	return classNone
}

// Token kinds of scootgate_model_tokens_total, the fields of
// usageevent.Usage.
const (
	tokInput = iota
	tokOutput
	tokCacheRead
	tokCacheWrite
	tokReasoning
	numTokenKinds
)

var tokenNames = [numTokenKinds]string{"input", "output", "cache_read", "cache_write", "reasoning"}

// modelKey names one (public model, backend) pair. Both are label values
// already checked (modelLabel, idLabel).
type modelKey struct{ model, backend string }

// modelSeries holds the pre-resolved series of one pair, so an
// observation costs one map lookup under a read lock and no label hashing.
type modelSeries struct {
	requests  [numClasses]prometheus.Counter
	tokens    [numTokenKinds]prometheus.Counter
	ttfb      prometheus.Observer
	stream    prometheus.Observer
	reqBytes  prometheus.Counter
	respBytes prometheus.Counter

	// key is the pair the series are labelled with (ModelOther for the
	// pairs beyond the bound).
	key modelKey
	// cost is the sum of the events' costs in picodollars, exact:
	// converted to dollars (a float) only when scraped.
	cost atomic.Int64
}

// modelFamilies are the per-model vectors and the bounded set of pairs
// that have series.
type modelFamilies struct {
	// immutable
	max       int
	requests  *prometheus.CounterVec   // model, backend, class
	tokens    *prometheus.CounterVec   // model, backend, type
	ttfb      *prometheus.HistogramVec // model, backend
	stream    *prometheus.HistogramVec // model, backend
	reqBytes  *prometheus.CounterVec   // model, backend
	respBytes *prometheus.CounterVec   // model, backend
	costDesc  *prometheus.Desc         // model, backend; collected from pairs

	mu    sync.RWMutex
	pairs map[modelKey]*modelSeries // guarded by mu
	named int                       // guarded by mu: pairs not under ModelOther
}

func newModelFamilies(max int) *modelFamilies {
	mb := []string{"model", "backend"}
	return &modelFamilies{
		max: max,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_model_requests_total",
			Help: "Provider attempts by public model, backend and class of the status sent to the client (none: the attempt sent the client nothing).",
		}, []string{"model", "backend", "class"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_model_tokens_total",
			Help: "Tokens the provider reported, by public model, backend and type (input, output, cache_read, cache_write, reasoning).",
		}, []string{"model", "backend", "type"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scootgate_model_ttfb_seconds",
			Help:    "Time from sending the request to the provider's response headers, 2xx answers only, by public model and backend.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60},
		}, mb),
		stream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scootgate_model_stream_duration_seconds",
			Help:    "Duration of streams relayed to the client (status 200), from the attempt's start to its end, by public model and backend.",
			Buckets: []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 180, 300, 600, 1200},
		}, mb),
		reqBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_model_request_bytes_total",
			Help: "Request body bytes sent to the provider, by public model and backend.",
		}, mb),
		respBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scootgate_model_response_bytes_total",
			Help: "Response body bytes read from the provider, by public model and backend.",
		}, mb),
		costDesc: prometheus.NewDesc("scootgate_model_cost_usd_total",
			"What the attempts cost at their targets' prices, in US dollars, by public model and backend (priced targets only; docs/usage-events.md \"Cost\").",
			mb, nil),
		pairs: make(map[modelKey]*modelSeries),
	}
}

func (f *modelFamilies) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.requests, f.tokens, f.ttfb, f.stream, f.reqBytes, f.respBytes, (*costCollector)(f)}
}

// costCollector exports scootgate_model_cost_usd_total from the pairs'
// exact sums: a float64 counter would round each addition.
type costCollector modelFamilies

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.costDesc }

// Collect sends one counter per series that has priced an attempt; pairs
// that share their backend's ModelOther series are sent once.
func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := make(map[*modelSeries]bool, len(c.pairs))
	for _, s := range c.pairs {
		if seen[s] {
			continue
		}
		seen[s] = true
		if pico := s.cost.Load(); pico > 0 {
			ch <- prometheus.MustNewConstMetric(c.costDesc, prometheus.CounterValue, float64(pico)/float64(usd.Dollar), s.key.model, s.key.backend)
		}
	}
}

// series returns the pair's series, creating them on first use; beyond
// f.max named pairs the model is ModelOther.
func (f *modelFamilies) series(model, backend string) *modelSeries {
	k := modelKey{model, backend}
	f.mu.RLock()
	s := f.pairs[k]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.pairs[k]; s != nil {
		return s
	}
	if f.named >= f.max {
		// Over the bound: the pair shares its backend's ModelOther series,
		// and is remembered so that the next lookup is the fast one.
		ok := modelKey{ModelOther, backend}
		if s = f.pairs[ok]; s == nil {
			s = f.resolve(ok)
			f.pairs[ok] = s
		}
		f.pairs[k] = s
		return s
	}
	s = f.resolve(k)
	f.pairs[k] = s
	f.named++
	return s
}

// resolve creates the series of k (allocates; once per pair).
func (f *modelFamilies) resolve(k modelKey) *modelSeries {
	s := &modelSeries{
		key:       k,
		ttfb:      f.ttfb.WithLabelValues(k.model, k.backend),
		stream:    f.stream.WithLabelValues(k.model, k.backend),
		reqBytes:  f.reqBytes.WithLabelValues(k.model, k.backend),
		respBytes: f.respBytes.WithLabelValues(k.model, k.backend),
	}
	for c := range numClasses {
		s.requests[c] = f.requests.WithLabelValues(k.model, k.backend, classNames[c])
	}
	for t := range numTokenKinds {
		s.tokens[t] = f.tokens.WithLabelValues(k.model, k.backend, tokenNames[t])
	}
	return s
}

// prune forgets every pair keep rejects: its series are deleted and its
// place under the bound is freed. A backend's ModelOther series go with
// the last pair that shares them; keep is never asked about ModelOther.
func (f *modelFamilies) prune(keep func(model, backend string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, s := range f.pairs {
		if k.model == ModelOther || keep(k.model, k.backend) {
			continue
		}
		delete(f.pairs, k)
		if f.pairs[modelKey{ModelOther, k.backend}] != s {
			f.named--
			f.deleteLocked(k)
		}
	}
	shared := map[*modelSeries]bool{}
	for k, s := range f.pairs {
		if k.model != ModelOther {
			shared[s] = true
		}
	}
	for k, s := range f.pairs {
		if k.model == ModelOther && !shared[s] {
			delete(f.pairs, k)
			f.deleteLocked(k)
		}
	}
}

// deleteLocked deletes the series of k from every family. f.mu is held.
func (f *modelFamilies) deleteLocked(k modelKey) {
	labels := prometheus.Labels{"model": k.model, "backend": k.backend}
	f.requests.DeletePartialMatch(labels)
	f.tokens.DeletePartialMatch(labels)
	f.ttfb.Delete(labels)
	f.stream.Delete(labels)
	f.reqBytes.Delete(labels)
	f.respBytes.Delete(labels)
}

// observe records one attempt's event.
func (f *modelFamilies) observe(ev *usageevent.Event) {
	// A pattern's requests are counted under the pattern, one of the
	// operator's entries: the names clients ask for are theirs to invent
	// and would make the series unbounded (docs/routing.md "Aliases and
	// patterns").
	model := ev.PublicModel
	if ev.ModelPattern != "" {
		model = ev.ModelPattern
	}
	s := f.series(modelLabel(model), idLabel(ev.Backend))
	s.requests[classOf(ev.HTTPStatus)].Inc()
	if ev.RequestBytes > 0 {
		s.reqBytes.Add(float64(ev.RequestBytes))
	}
	if ev.ResponseBytes > 0 {
		s.respBytes.Add(float64(ev.ResponseBytes))
	}
	ok := ev.SendState == usageevent.SendResponseReceived && ev.HTTPStatus/100 == 2
	if ok && ev.TTFBMs > 0 {
		s.ttfb.Observe(ev.TTFBMs / 1000)
	}
	if ev.Stream && ev.HTTPStatus == 200 {
		s.stream.Observe(ev.DurationMs / 1000)
	}
	if c := ev.Cost; c != nil {
		if pico, err := usd.ParseAmount(c.USD); err == nil && pico > 0 {
			addSat(&s.cost, pico)
		}
	}
	if u := ev.Usage; u != nil {
		for t, n := range [numTokenKinds]int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
			if n > 0 {
				s.tokens[t].Add(float64(n))
			}
		}
	}
}

// modelLabel returns a public model name as a label value when it has
// the shape a route snapshot allows (valid UTF-8, 1-256 runes, no control
// characters) and is not ModelOther; else "invalid". The node only
// observes names its routing table matched, so this is a guard, not a
// filter: a client's unmatched model never reaches a label.
func modelLabel(s string) string {
	if s == "" || s == ModelOther || len(s) > 4*maxModelLabel || !utf8.ValidString(s) ||
		utf8.RuneCountInString(s) > maxModelLabel || strings.ContainsFunc(s, unicode.IsControl) {
		return labelInvalid
	}
	return s
}

// addSat adds a non-negative amount to a counter, saturating at usd.Max.
func addSat(c *atomic.Int64, a usd.Amount) {
	for {
		old := c.Load()
		if c.CompareAndSwap(old, int64(usd.Add(usd.Amount(old), a))) {
			return
		}
	}
}
