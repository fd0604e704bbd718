package usage_test

import (
	"encoding/json"
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
