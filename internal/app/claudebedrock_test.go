package app

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// pairModel has two targets of one tier, the Bedrock backend and
// Anthropic's own API: which one serves a turn is affinity's choice.
const pairModel = "demo-anthropic-pair"

var pairTOML = `
[models.` + pairModel + `]
[[models.` + pairModel + `.targets]]
backend = "br"
model = "` + bedrockProvModel + `"
weight = 1
stream = true
tools = true
[[models.` + pairModel + `.targets]]
backend = "an"
model = "` + anthProvModel + `"
weight = 1
stream = true
tools = true
`

// claudeBedrockSession is the session id the test gives Claude Code.
const claudeBedrockSession = "6f1c2f4e-3b7a-4c55-9d0e-1a2b3c4d5e6f"

// TestClaudeCodeBedrock: Claude Code, unchanged, in its Bedrock mode with
// the variables README.md "Claude Code (Bedrock mode)" gives, answers two
// turns of one session through the node: it lists the inference
// profiles, its requests come in by the Bedrock door with the client key
// as a Bedrock API key, every Messages request is one usage event, and
// every turn of the session is placed by affinity on the same target.
func TestClaudeCodeBedrock(t *testing.T) {
	bin := requireAgent(t, "claude", "@anthropic-ai/claude-code")
	s := startStack(t, stackOptions{bedrock: true, extraTOML: pairTOML})
	home, work := t.TempDir(), t.TempDir()

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = work
		cmd.Env = []string{
			"HOME=" + home,
			"PATH=" + os.Getenv("PATH"),
			"CLAUDE_CODE_USE_BEDROCK=1",
			"ANTHROPIC_BEDROCK_BASE_URL=" + s.api,
			"AWS_BEARER_TOKEN_BEDROCK=" + clientKey,
			"AWS_REGION=us-east-1",
			"ANTHROPIC_MODEL=" + pairModel,
			"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + pairModel,
			"ANTHROPIC_DEFAULT_SONNET_MODEL=" + pairModel,
			"ANTHROPIC_DEFAULT_OPUS_MODEL=" + pairModel,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
			"NO_COLOR=1",
			"CI=1",
		}
		out, err := cmd.CombinedOutput()
		// The client key is the test's own; still, never print it.
		shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", args[0], err, shown)
		}
		return shown
	}
	first := run("-p", "--session-id", claudeBedrockSession, "repeat after me: blue harbour lights")
	if !strings.Contains(first, "blue harbour lights") {
		t.Errorf("turn 1 printed no echo of the prompt:\n%s", first)
	}
	second := run("-p", "--resume", claudeBedrockSession, "repeat after me: green river stones")
	if !strings.Contains(second, "green river stones") {
		t.Errorf("turn 2 printed no echo of the prompt:\n%s", second)
	}

	// Claude Code asked GET /inference-profiles, and nothing it asked was
	// a 404.
	resp, err := http.Get(s.health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `scootgate_requests_total{code="200",endpoint="models",send_state="none"}`) {
		t.Error("no model listing answered 200: Claude Code did not get its inference profiles")
	}
	if strings.Contains(string(metrics), `code="404"`) {
		t.Errorf("the node answered 404:\n%s", grepLines(string(metrics), `code="404"`))
	}

	reqs := s.prov.Requests()
	backends := map[fakeprovider.Protocol]int{}
	for _, r := range reqs {
		backends[r.Protocol]++
	}
	t.Logf("the provider saw %d requests (%v); turn 1 printed %q, turn 2 %q", len(reqs), backends, first, second)
	if len(backends) != 1 {
		t.Errorf("the session's requests went to %v: want one target for every turn", backends)
	}
	s.shutdown()
	var messages int
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint != usageevent.EndpointMessages {
			continue
		}
		messages++
		if ev.PublicModel != pairModel || ev.HTTPStatus != 200 || ev.Usage == nil || ev.Placement != usageevent.PlacementAffinity {
			t.Errorf("event: model %q status %d usage %+v placement %q, want a 200 with usage placed by affinity", ev.PublicModel, ev.HTTPStatus, ev.Usage, ev.Placement)
		}
	}
	if messages < 2 || messages != len(reqs) {
		t.Errorf("%d Messages events for %d provider requests: want one per request, at least one per turn", messages, len(reqs))
	}
}
