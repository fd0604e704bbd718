package usage

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Attempt is what the request path knows of one finished provider
// attempt, in its own terms (durations, times, the status it wrote). The
// usage event is made from it by [NewEvent]: the event's rules (its id,
// schema, units, which status it carries) live here, not in the request
// path.
type Attempt struct {
	NodeID    string
	RequestID string
	TenantID  string
	KeyID     string

	PublicModel   string
	ModelPattern  string // the pattern entry that matched PublicModel; "" for an exact name
	ServedModel   string // the public model whose target served: PublicModel, or the fallback that did
	ProviderModel string
	Backend       string
	Protocol      string // usageevent.Protocol*
	Platform      string // usageevent.Platform*: how the protocol travelled
	Region        string // the platform's region, "" where it has none
	Endpoint      string // usageevent.Endpoint*
	Placement     string // docs/routing.md "Affinity"
	Stream        bool

	N            int    // 1-based attempt number within the request
	SendState    string // usageevent.Send*
	FailureStage string // usageevent.Stage*; "" on success
	// ClientStatus is the HTTP status written to the client, 0 if none;
	// 499 is the log's word for "the client went away first", which no
	// client received, so the event carries none.
	ClientStatus int

	RequestBytes  int64
	ResponseBytes int64
	TTFB          time.Duration // 0 if no first byte
	Started       time.Time
	Ended         time.Time

	// Usage and RawUsage are the provider's reported usage, normalised and
	// as sent; HasUsage says there was one.
	Usage    usageevent.Usage
	RawUsage json.RawMessage
	HasUsage bool

	// Priced says the target had a price (docs/usage-events.md "Cost"):
	// the event then carries Cost, PriceVersion and CostEstimated.
	Priced        bool
	Cost          usd.Amount
	PriceVersion  uint64 // the routing snapshot version that set the price; 0 = static configuration
	CostEstimated bool   // no usage reported: the cost is of estimated tokens
}

// clientGone is the log-only status of an attempt whose client went away
// first.
const clientGone = 499

// eventWithUsage holds an event and its usage in one allocation.
type eventWithUsage struct {
	ev usageevent.Event
	u  usageevent.Usage
	c  usageevent.Cost
}

// NewEvent makes the usage event of one attempt (docs/usage-events.md:
// one event per provider route attempt), with a new event id. It does not
// validate: [Recorder.Record] does, before encoding.
func NewEvent(a *Attempt) *usageevent.Event {
	p := &eventWithUsage{ev: usageevent.Event{
		EventID:       NewEventID(a.Ended),
		Schema:        usageevent.Schema,
		NodeID:        a.NodeID,
		RequestID:     a.RequestID,
		TenantID:      a.TenantID,
		KeyID:         a.KeyID,
		PublicModel:   a.PublicModel,
		ModelPattern:  a.ModelPattern,
		ServedModel:   a.ServedModel,
		ProviderModel: a.ProviderModel,
		Backend:       a.Backend,
		Protocol:      a.Protocol,
		Platform:      a.Platform,
		Region:        a.Region,
		Endpoint:      a.Endpoint,
		Placement:     a.Placement,
		Stream:        a.Stream,
		Attempt:       a.N,
		SendState:     a.SendState,
		FailureStage:  a.FailureStage,
		HTTPStatus:    a.ClientStatus,
		RequestBytes:  a.RequestBytes,
		ResponseBytes: a.ResponseBytes,
		TTFBMs:        ms(a.TTFB),
		DurationMs:    ms(a.Ended.Sub(a.Started)),
		StartedAt:     a.Started.UTC(),
	}}
	ev := &p.ev
	if a.ClientStatus == clientGone {
		ev.HTTPStatus = 0
	}
	if a.HasUsage {
		p.u = a.Usage
		ev.Usage, ev.ProviderUsage = &p.u, a.RawUsage
	}
	if a.Priced {
		p.c = usageevent.Cost{USD: a.Cost.String(), PriceVersion: a.PriceVersion, Estimated: a.CostEstimated}
		ev.Cost = &p.c
	}
	return ev
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// NewEventID returns a new event id: a UUID version 7 (RFC 9562 §5.7) in
// canonical lowercase form, whose first 48 bits are now in Unix
// milliseconds and whose other 74 variable bits come from crypto/rand.
//
// The id is made once per attempt and stored with the event, so a replay
// carries the same id (docs/usage-events.md). Random bits make ids unique across a fleet
// without coordination (two ids of one millisecond collide with probability
// 2^-74); the time prefix keeps ids of nearby events close in a consumer's
// index and tells roughly when an event was recorded. Ids made in the same
// millisecond are not ordered among themselves.
func NewEventID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(max(now.UnixMilli(), 0))
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // variant 10 (RFC 9562)

	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}
