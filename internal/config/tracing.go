package config

import (
	"time"
)

// Tracing is OpenTelemetry trace export ([tracing]; docs/operations.md
// "Traces"). Endpoint "" turns it off, the default.
type Tracing struct {
	// Endpoint is the collector's OTLP/HTTP traces URL
	// (https://collector:4318/v1/traces); http:// only to a loopback
	// collector (a local agent).
	Endpoint string
	// SampleRatio is the share of new traces recorded, 0 to 1; a request
	// with a traceparent follows its sampled flag instead.
	SampleRatio float64
	// Interval is the longest wait before a partial batch is exported.
	Interval time.Duration
}

// Ranges of the [tracing] keys (documented in the package doc).
const (
	minTracingInterval = 100 * time.Millisecond
	maxTracingInterval = time.Minute
)

// tracingSection reads [tracing]; absent, tracing is off.
func (v *validator) tracingSection(root *table, tr *Tracing) {
	t, ok := section(root, "tracing")
	if !ok {
		return
	}
	defer t.done()
	if raw, ok := t.str("endpoint", ""); ok && raw != "" {
		if u, ok := v.absURL(t.at("endpoint"), raw, "an http:// or https:// URL", "http", "https"); ok {
			switch {
			case u.User != nil:
				v.ps.add(t.at("endpoint"), "must not contain credentials")
			case u.Scheme == "http" && !loopback(u.Hostname()):
				v.ps.add(t.at("endpoint"), "plain http only to a loopback collector; use https")
			default:
				tr.Endpoint = raw
			}
		}
	}
	if raw, ok := t.get("sample_ratio", ""); ok {
		var r float64
		switch n := raw.(type) {
		case float64:
			r = n
		case int64:
			r = float64(n)
		default:
			t.mismatch("sample_ratio", "a number from 0 to 1", raw)
			r = -1
		}
		if r < 0 || r > 1 {
			if r != -1 {
				v.ps.add(t.at("sample_ratio"), "%v is out of range; expected 0..1", r)
			}
		} else {
			tr.SampleRatio = r
		}
	}
	v.durationRange(t, "interval", minTracingInterval, maxTracingInterval, &tr.Interval)
}
