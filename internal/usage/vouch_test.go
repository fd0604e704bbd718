package usage

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
	"github.com/scootgate/scootgate/pkg/usd"
)

// The Recorder skips Validate for the events appendJSON vouches for. These
// tests hold the vouching to Validate: appendJSON may vouch only for an
// event Validate accepts (checkAppendJSON fails otherwise), and the
// Recorder records exactly the events Validate accepts, as when it
// validated every event.

// checkRecordExact records e on a fresh Recorder and fails unless it was
// recorded exactly when Validate accepts it and json.Marshal can encode
// it.
func checkRecordExact(t *testing.T, e *usageevent.Event) {
	t.Helper()
	out := &sliceAppender{accept: true}
	r := NewRecorder(out, 0)
	r.Record(e)
	_, merr := json.Marshal(e)
	want := e.Validate() == nil && merr == nil
	if got := r.Stats().Recorded == 1; got != want {
		t.Fatalf("recorded %v, want %v (Validate: %v, json.Marshal: %v)\nevent: %#v", got, want, e.Validate(), merr, e)
	}
}

// names are ids and names: valid ones of the kind a node writes, and each
// edge of Validate's rule (length in bytes and characters, controls, DEL,
// non-ASCII, what JSON escapes).
var names = []string{
	"node-a", "sg-8a17d3c05b9e2f64a1c7d0e3", "t_9", "k_123", "demo-gpt", "gpt-4.1-mini-2025-04-14", "x",
	strings.Repeat("m", usageevent.MaxStringLength), strings.Repeat("m", usageevent.MaxStringLength+1),
	strings.Repeat("é", usageevent.MaxStringLength), strings.Repeat("é", usageevent.MaxStringLength+1),
	"", " ", "a b", "a<b", "a&b", `a"b`, `a\b`, "a\x7fb", "a\x00", "\t", "a\nb", "日本語", "\xff", "a\u2028",
}

// words are enum-like members: failure stages, endpoints, platforms,
// regions, send states, protocols, each rule's edges among them.
var words = []string{
	"", "connect", "client_cancelled", "chat_completions", "us-east-1", "eu-west-3", "openai", "bedrock", "vertex",
	"a", "a1", "1a", "_a", "-a", "a_", "a-", "A", "aB", "a b", "a.b", strings.Repeat("a", usageevent.MaxStageLength),
	strings.Repeat("a", usageevent.MaxStageLength+1), usageevent.SendResponseReceived, usageevent.SendPossiblySent,
	usageevent.SendDefinitelyNotSent, usageevent.ProtocolAnthropic, usageevent.ProtocolGemini,
	usageevent.ProtocolBedrockConverse, "OpenAI", "é",
}

// costs are cost.usd values: usd.Amount.String's and each edge of
// Validate's rule.
var costs = []string{
	"0", "0.0105", "0.000000000001", "12.5", "999999.999999999999", "1000000", "9223372", "9223372.000000000001",
	"9223373", "0.10", "0.", ".5", "00.5", "01", "-1", "1e3", "0.0000000000001", "", " 1", "1,5",
	usd.Amount(123456789).String(), usd.Max.String(),
}

// raws are provider usage objects: plain, pretty, escaped, and not
// objects or not JSON.
var raws = []string{
	`{"prompt_tokens":615,"completion_tokens":153,"total_tokens":768,"prompt_tokens_details":{"cached_tokens":512}}`,
	"{\n  \"input_tokens\": 12,\n  \"cache_creation\": {\"ephemeral_5m_input_tokens\": 0},\n  \"service_tier\": \"standard\"\n}\n",
	`{"a":[1,-2.5e-3,true,false,null,"<&>\u2028"]}`, "{\"a\":\"\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\"}", `{"a":"\u00e9"}`,
	`{}`, ` {} `, `null`, ` null `, `[]`, `1`, `"s"`, `{"a":}`, `{"a":1,}`, `{"a":01}`, `{} {}`, `{"a":"x` + "\x01" + `"}`,
	string(nestedRaw(16)), string(nestedRaw(17)), string(nestedRaw(18)), "",
}

// genNearValid returns a valid event of the kind a node writes, with, two
// times in three, one or two members changed to a value from the pools
// above or the generators of encode_test.go: so about half of the events
// are valid, and each rule is broken alone now and then.
func genNearValid(r *rand.Rand) *usageevent.Event {
	e := &usageevent.Event{
		EventID: NewEventID(time.Unix(1700000000+r.Int64N(1e8), 0)), Schema: usageevent.Schema,
		NodeID: pick(r, names[:7]...), RequestID: pick(r, names[:7]...), TenantID: pick(r, names[:7]...),
		KeyID: pick(r, names[:7]...), PublicModel: pick(r, names[:7]...), ProviderModel: pick(r, names[:7]...),
		Backend: pick(r, names[:7]...), Protocol: pick(r, usageevent.Protocols()...),
		Endpoint: pick(r, "", usageevent.EndpointChatCompletions, usageevent.EndpointMessages),
		Platform: pick(r, "", usageevent.PlatformOpenAI, usageevent.PlatformBedrock),
		Region:   pick(r, "", "us-east-1"), Placement: pick(r, "", usageevent.PlacementBalanced),
		Stream: r.IntN(2) == 0, Attempt: 1 + r.IntN(3), SendState: usageevent.SendResponseReceived,
		HTTPStatus: pick(r, 200, 0, 429, 100, 599), RequestBytes: r.Int64N(1e5), ResponseBytes: r.Int64N(1e5),
		TTFBMs: float64(r.IntN(1e6)) / 1000, DurationMs: float64(r.IntN(1e7)) / 1000,
		StartedAt: time.Unix(1700000000+r.Int64N(1e8), r.Int64N(1e9)).UTC(),
	}
	if r.IntN(2) == 0 {
		e.ModelPattern, e.ServedModel = "demo-*", "demo-gpt"
	}
	switch r.IntN(4) {
	case 0:
		e.SendState = pick(r, usageevent.SendDefinitelyNotSent, usageevent.SendPossiblySent)
		e.FailureStage = pick(r, usageevent.StageConnect, usageevent.StageClientCancelled, usageevent.StageSend)
		e.ResponseBytes, e.TTFBMs = 0, 0
	case 1:
		e.FailureStage = pick(r, usageevent.StageStream, usageevent.StageProviderStatus)
	default:
		in := r.Int64N(1e6)
		e.Usage = &usageevent.Usage{InputTokens: in, OutputTokens: r.Int64N(1e4), CacheReadTokens: in / 2}
		e.ProviderUsage = json.RawMessage(pick(r, raws[:5]...))
	}
	if r.IntN(2) == 0 {
		e.Cost = &usageevent.Cost{USD: pick(r, costs[:5]...), PriceVersion: r.Uint64N(10), Estimated: e.Usage == nil && r.IntN(2) == 0}
	}
	for range r.IntN(3) {
		mutate(r, e)
	}
	return e
}

// mutate changes one member of e to a value that may break its rule.
func mutate(r *rand.Rand, e *usageevent.Event) {
	str := func(p *string, pool []string) {
		if r.IntN(5) == 0 {
			*p = genString(r)
		} else {
			*p = pick(r, pool...)
		}
	}
	switch r.IntN(24) {
	case 0:
		e.EventID = pick(r, "", "01a226bf-497b-7f65-860e-1f8aa3e75316", "01A226BF-497B-7F65-860E-1F8AA3E75316",
			"01a226bf-497b-7f65-860e-1f8aa3e7531", "01a226bf-497b-7f65-860e-1f8aa3e753166", "01a226bf_497b-7f65-860e-1f8aa3e75316",
			"01a226bg-497b-7f65-860e-1f8aa3e75316", "01a226bf-497b-7f65-860e1-f8aa3e75316")
	case 1:
		e.Schema = pick(r, 0, 1, 3, -2)
	case 2:
		e.Authoritative = true
	case 3:
		str(pick(r, &e.NodeID, &e.RequestID, &e.TenantID, &e.KeyID), names)
	case 4:
		str(pick(r, &e.PublicModel, &e.ProviderModel, &e.Backend, &e.ModelPattern, &e.ServedModel), names)
	case 5:
		str(&e.Protocol, words)
	case 6:
		str(pick(r, &e.Endpoint, &e.Platform, &e.Region, &e.Placement), words)
	case 7:
		e.Attempt = pick(r, 0, -1, math.MaxInt32, math.MaxInt32+1, math.MinInt)
	case 8:
		str(&e.SendState, words)
	case 9:
		str(&e.FailureStage, words)
	case 10:
		e.HTTPStatus = pick(r, -1, 1, 99, 100, 599, 600, 499)
	case 11:
		e.RequestBytes = pick[int64](r, -1, 0, math.MaxInt64)
	case 12:
		e.ResponseBytes = pick[int64](r, -1, 0, 1, math.MaxInt64)
	case 13:
		e.TTFBMs = pick(r, -1, 0, math.Copysign(0, -1), 1e-7, math.NaN(), math.Inf(1), 5e300)
	case 14:
		e.DurationMs = pick(r, -1e-9, 0, math.Copysign(0, -1), math.Inf(-1), 1e22)
	case 15:
		e.StartedAt = pick(r, time.Time{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now(),
			time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)))
	case 16:
		e.Usage = nil
	case 17:
		e.Usage = &usageevent.Usage{InputTokens: genInt64(r), OutputTokens: genInt64(r)}
	case 18:
		if u := e.Usage; u != nil {
			switch r.IntN(3) {
			case 0:
				u.CacheReadTokens, u.CacheWriteTokens = u.InputTokens, pick[int64](r, 0, 1)
			case 1:
				u.ReasoningTokens = u.OutputTokens + pick[int64](r, 0, 1)
			default:
				u.CacheWriteTokens = pick[int64](r, -1, math.MaxInt64, math.MinInt64)
			}
		}
	case 19:
		e.ProviderUsage = pick(r, json.RawMessage(nil), json.RawMessage(pick(r, raws...)))
	case 20:
		e.ProviderUsage = genRaw(r)
	case 21:
		if e.Cost == nil {
			e.Cost = &usageevent.Cost{}
		}
		e.Cost.USD = pick(r, costs...)
	case 22:
		if e.Cost != nil {
			e.Cost.Estimated = !e.Cost.Estimated
		}
	default:
		e.Cost = nil
	}
}

// TestVouchedGenerated holds appendJSON's vouching to Validate, and the
// Recorder to exactly the events Validate accepts, on generated events
// near the rules' edges.
func TestVouchedGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2026))
	n := 50000
	if testing.Short() {
		n = 5000
	}
	var vouched, valid int
	for range n {
		e := genNearValid(r)
		if checkAppendJSON(t, e, nil) {
			vouched++
		}
		if e.Validate() == nil {
			valid++
		}
		checkRecordExact(t, e)
	}
	// The test means something only if both paths run often.
	t.Logf("%d events: %d valid, %d vouched for", n, valid, vouched)
	if vouched < n/4 || valid-vouched < n/100 {
		t.Fatalf("%d of %d events vouched for, %d valid: the generator no longer reaches both paths", vouched, n, valid)
	}
}

// TestVouchedNodeEvents: the events a node builds (NewEvent) for typical
// attempts are vouched for, so the Recorder does not validate them.
func TestVouchedNodeEvents(t *testing.T) {
	end := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	base := func() *Attempt {
		return &Attempt{
			NodeID: "node-a", RequestID: "sg-8a17d3c05b9e2f64a1c7d0e3", TenantID: "t_9", KeyID: "k_123",
			PublicModel: "demo-gpt", ServedModel: "demo-gpt", ProviderModel: "gpt-4.1-mini-2025-04-14", Backend: "openai-1",
			Endpoint: usageevent.EndpointChatCompletions, Placement: usageevent.PlacementBalanced, N: 1,
			SendState: usageevent.SendResponseReceived, ClientStatus: 200, RequestBytes: 2873, ResponseBytes: 934,
			TTFB: 240 * time.Millisecond, Started: end.Add(-300 * time.Millisecond), Ended: end,
			Usage:    usageevent.Usage{InputTokens: 615, OutputTokens: 153, CacheReadTokens: 512},
			RawUsage: json.RawMessage("{\n  \"prompt_tokens\": 615,\n  \"prompt_tokens_details\": {\"cached_tokens\": 512}\n}"),
			HasUsage: true, Priced: true, Cost: usd.Amount(123456789), PriceVersion: 7,
		}
	}
	for _, p := range usageevent.Protocols() {
		a := base()
		a.Protocol = p
		checkVouched(t, "protocol "+p, a)
	}
	a := base()
	a.SendState, a.FailureStage, a.ClientStatus, a.ResponseBytes, a.TTFB = usageevent.SendDefinitelyNotSent, usageevent.StageConnect, 502, 0, 0
	a.HasUsage, a.CostEstimated = false, true
	a.Protocol = usageevent.ProtocolAnthropic
	checkVouched(t, "not sent", a)
	a = base()
	a.Protocol, a.Platform, a.Region, a.FailureStage, a.ClientStatus = usageevent.ProtocolAnthropic, usageevent.PlatformBedrock, "us-east-1", usageevent.StageClientCancelled, 499
	checkVouched(t, "cancelled on bedrock", a)
}

func checkVouched(t *testing.T, name string, a *Attempt) {
	t.Helper()
	e := NewEvent(a)
	if _, valid, err := appendJSON(nil, e); err != nil || !valid {
		t.Errorf("%s: appendJSON vouched %v, err %v, for a node's event (Validate: %v)", name, valid, err, e.Validate())
	}
}

// FuzzVouched holds appendJSON's vouching to Validate and the Recorder to
// exactly the events Validate accepts, on events whose members the fuzzer
// writes into a valid one.
func FuzzVouched(f *testing.F) {
	f.Add("node-a", "demo-gpt", "chat_completions", "us-east-1", "response_received", "", "0.0105", 1, 200, int64(934), 240.5,
		int64(615), int64(512), []byte(raws[0]))
	f.Add("a<b", "\x7f", "A", "-a", "possibly_sent", "send", "0.10", 0, 600, int64(-1), -1.0, int64(-1), int64(2), []byte(raws[1]))
	f.Add(strings.Repeat("m", 257), "", "", "", "definitely_not_sent", "connect", "9223372", 2, 0, int64(0), 0.0,
		int64(0), int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, name, model, word, region, state, stage, cost string, attempt, status int,
		nbytes int64, ttfb float64, in, cached int64, raw []byte,
	) {
		e := &usageevent.Event{
			EventID: "01a226bf-497b-7f65-860e-1f8aa3e75316", Schema: usageevent.Schema,
			NodeID: name, RequestID: "sg-1", TenantID: "t", KeyID: name, PublicModel: model, ModelPattern: model,
			ProviderModel: "p", Backend: "b", Protocol: usageevent.ProtocolOpenAI, Endpoint: word, Platform: word,
			Region: region, Attempt: attempt, SendState: state, FailureStage: stage, HTTPStatus: status,
			RequestBytes: nbytes, ResponseBytes: nbytes, TTFBMs: ttfb, DurationMs: ttfb,
			StartedAt: time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC),
			Cost:      &usageevent.Cost{USD: cost},
		}
		if raw != nil {
			e.ProviderUsage = raw
			e.Usage = &usageevent.Usage{InputTokens: in, CacheReadTokens: cached}
		}
		checkAppendJSON(t, e, []byte("x"))
		checkRecordExact(t, e)
	})
}
