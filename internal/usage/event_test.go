package usage_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestNewEvent: the event carries the attempt's facts in the event's
// units (milliseconds, UTC), a fresh valid id, no status for a client
// that went away first (499 is the log's word only), and a copy of the
// usage.
func TestNewEvent(t *testing.T) {
	started := time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	base := usage.Attempt{
		NodeID: "node-1", RequestID: "req-1", TenantID: "t", KeyID: "k",
		PublicModel: "gpt", ProviderModel: "provider-gpt", Backend: "oa",
		Protocol: usageevent.ProtocolOpenAI, Endpoint: usageevent.EndpointChatCompletions,
		Placement: usageevent.PlacementBalanced, Stream: true, N: 2,
		SendState: usageevent.SendResponseReceived, ClientStatus: 200,
		RequestBytes: 10, ResponseBytes: 20,
		TTFB: 1500 * time.Microsecond, Started: started, Ended: started.Add(2*time.Second + 250*time.Microsecond),
	}
	want := usageevent.Event{
		Schema: usageevent.Schema, NodeID: "node-1", RequestID: "req-1", TenantID: "t", KeyID: "k",
		PublicModel: "gpt", ProviderModel: "provider-gpt", Backend: "oa",
		Protocol: usageevent.ProtocolOpenAI, Endpoint: usageevent.EndpointChatCompletions,
		Placement: usageevent.PlacementBalanced, Stream: true, Attempt: 2,
		SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		RequestBytes: 10, ResponseBytes: 20, TTFBMs: 1.5, DurationMs: 2000.25,
		StartedAt: started.UTC(),
	}
	withUsage := base
	withUsage.Usage = usageevent.Usage{InputTokens: 3, OutputTokens: 4}
	withUsage.RawUsage = json.RawMessage(`{"prompt_tokens":3,"completion_tokens":4}`)
	withUsage.HasUsage = true
	wantUsage := want
	wantUsage.Usage = &usageevent.Usage{InputTokens: 3, OutputTokens: 4}
	wantUsage.ProviderUsage = withUsage.RawUsage

	gone := base
	gone.ClientStatus, gone.FailureStage = 499, usageevent.StageClientCancelled
	wantGone := want
	wantGone.HTTPStatus, wantGone.FailureStage = 0, usageevent.StageClientCancelled

	for _, tt := range []struct {
		name string
		a    usage.Attempt
		want usageevent.Event
	}{
		{"no usage", base, want},
		{"usage", withUsage, wantUsage},
		{"client gone first", gone, wantGone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			ev := usage.NewEvent(&a)
			if err := ev.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if diff := cmp.Diff(*ev, tt.want, cmpopts.IgnoreFields(usageevent.Event{}, "EventID")); diff != "" {
				t.Errorf("event (-got +want):\n%s", diff)
			}
			if !uuidV7.MatchString(ev.EventID) {
				t.Errorf("event id %q, not a UUIDv7", ev.EventID)
			}
			if ev.Usage != nil {
				a.Usage.InputTokens = 99
				if ev.Usage.InputTokens != 3 {
					t.Error("the event shares the attempt's usage")
				}
			}
		})
	}
}

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewEventID(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 123_456_789, time.UTC)
	seen := map[string]bool{}
	for range 1000 {
		id := usage.NewEventID(now)
		if !uuidV7.MatchString(id) {
			t.Fatalf("NewEventID = %q, not a canonical UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("NewEventID repeated %q", id)
		}
		seen[id] = true
		// The first 48 bits are the Unix time in milliseconds.
		if got, want := id[:8]+id[9:13], "01a226bf497b"; got != want {
			t.Fatalf("time prefix = %s, want %s (%d ms)", got, want, now.UnixMilli())
		}
		e := &usageevent.Event{
			Schema: usageevent.Schema, NodeID: "n", RequestID: "r", TenantID: "t", KeyID: "k",
			PublicModel: "m", ProviderModel: "m", Backend: "b", Protocol: usageevent.ProtocolOpenAI,
			Attempt: 1, SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
			StartedAt: time.Unix(1, 0), Usage: &usageevent.Usage{}, ProviderUsage: json.RawMessage(`{}`),
		}
		e.EventID = id
		if err := e.Validate(); err != nil {
			t.Fatalf("an event with id %q is invalid: %v", id, err)
		}
	}
	if id := usage.NewEventID(time.Unix(-5, 0)); id[:13] != "00000000-0000" {
		t.Errorf("a time before 1970 gives prefix %s, want zero", id[:13])
	}
}
