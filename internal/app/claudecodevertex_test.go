package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// claudeCodeVertexModel is served by a Vertex target and an Anthropic one
// of the same tier and weight, so that only affinity keeps a session on
// one of them.
const claudeCodeVertexModel = "demo-claude-code-vertex"

// claudeCodeSession is the session id the test gives Claude Code.
const claudeCodeSession = "5b0c6f8e-3d7a-4f2e-9c1b-7a4d2e9f6b13"

// TestClaudeCodeVertex: Claude Code in its Vertex mode, unchanged, answers
// two turns of one session through the node with nothing but the
// documented variables (CLAUDE_CODE_USE_VERTEX, CLAUDE_CODE_SKIP_VERTEX_AUTH,
// ANTHROPIC_VERTEX_BASE_URL, ANTHROPIC_VERTEX_PROJECT_ID, CLOUD_ML_REGION,
// the node's key in ANTHROPIC_AUTH_TOKEN, the model): every request is one
// usage event, and affinity keeps both turns on one target.
func TestClaudeCodeVertex(t *testing.T) {
	bin := requireAgent(t, "claude", "@anthropic-ai/claude-code")
	s := startStack(t, stackOptions{vertex: true, extraTOML: `
[models.` + claudeCodeVertexModel + `]
[[models.` + claudeCodeVertexModel + `.targets]]
backend = "vx"
model = "` + vertexProvModel + `"
weight = 1
stream = true
tools = true
[[models.` + claudeCodeVertexModel + `.targets]]
backend = "an"
model = "` + anthProvModel + `"
weight = 1
stream = true
tools = true
`})
	home, work := t.TempDir(), t.TempDir()
	env := []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"CLAUDE_CODE_USE_VERTEX=1",
		"CLAUDE_CODE_SKIP_VERTEX_AUTH=1",
		"ANTHROPIC_VERTEX_BASE_URL=" + s.api + "/v1",
		"ANTHROPIC_VERTEX_PROJECT_ID=my-project",
		"CLOUD_ML_REGION=us-east5",
		"ANTHROPIC_AUTH_TOKEN=" + clientKey,
		"ANTHROPIC_MODEL=" + claudeCodeVertexModel,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + claudeCodeVertexModel,
		"ANTHROPIC_SMALL_FAST_MODEL=" + claudeCodeVertexModel,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"NO_COLOR=1",
		"CI=1",
	}
	turn := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		// The client key is the test's own; still, never print it.
		shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", args[0], err, shown)
		}
		return shown
	}
	first := turn("-p", "--session-id", claudeCodeSession, "repeat after me: amber lantern")
	if !strings.Contains(first, "amber lantern") {
		t.Errorf("the first turn printed no echo of the prompt:\n%s", first)
	}
	firstReqs := len(s.prov.Requests())
	second := turn("-p", "--resume", claudeCodeSession, "repeat after me: silver kettle")
	if !strings.Contains(second, "silver kettle") {
		t.Errorf("the second turn printed no echo of the prompt:\n%s", second)
	}

	reqs := s.prov.Requests()
	if firstReqs == 0 || len(reqs) <= firstReqs {
		t.Fatalf("the provider saw %d requests in the first turn and %d in all", firstReqs, len(reqs))
	}
	for _, r := range reqs {
		// Both turns name the session (metadata.user_id, which goes up
		// as it is): affinity has one key to follow.
		if !strings.Contains(string(r.Body), claudeCodeSession) {
			t.Errorf("a request to %s does not name the session", r.Path)
		}
		if strings.Contains(r.Header.Get("Authorization"), clientKey) || strings.Contains(r.Path, "my-project") {
			t.Errorf("the client's key or project reached the provider (%s)", r.Path)
		}
	}
	t.Logf("claude -p made %d provider requests over two turns", len(reqs))
	s.shutdown()
	events := s.outboxEvents(t)
	if len(events) != len(reqs) {
		t.Errorf("%d usage events for %d provider requests", len(events), len(reqs))
	}
	backends := map[string]int{}
	for _, ev := range events {
		if ev.Protocol != usageevent.ProtocolAnthropic || ev.Endpoint != usageevent.EndpointMessages || ev.FailureStage != "" {
			t.Errorf("event %s %s failed at %q", ev.Protocol, ev.Endpoint, ev.FailureStage)
		}
		if ev.Placement != usageevent.PlacementAffinity {
			t.Errorf("event placed %q, want affinity (the session names itself)", ev.Placement)
		}
		backends[ev.Backend]++
	}
	if len(backends) != 1 {
		t.Errorf("one session's turns went to backends %v, want one", backends)
	}
}

// TestGeminiCLIVertexExpress: Gemini CLI (the @google/genai SDK inside it)
// in Vertex AI express mode, with the three variables README gives for
// genai in Vertex mode and the Vertex login selected, posts to
// /v1beta1/publishers/google/models/{model}:streamGenerateContent with the
// node's key as its API key, and answers; every request is one usage
// event.
func TestGeminiCLIVertexExpress(t *testing.T) {
	bin := requireAgent(t, "gemini", "@google/gemini-cli")
	s := startStack(t, stackOptions{gemini: true})
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"security":{"auth":{"selectedType":"vertex-ai"}},"general":{"disableAutoUpdate":true},"privacy":{"usageStatisticsEnabled":false}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-m", geminiModel, "-p", "repeat after me: copper bridge")
	cmd.Dir = work
	cmd.Env = []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"GOOGLE_GENAI_USE_VERTEXAI=true",
		"GOOGLE_API_KEY=" + clientKey,
		"GOOGLE_VERTEX_BASE_URL=" + s.api + "/",
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"NO_COLOR=1",
		"CI=1",
	}
	out, err := cmd.CombinedOutput()
	shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
	if err != nil {
		t.Fatalf("gemini -p: %v\n%s", err, shown)
	}
	if !strings.Contains(shown, "copper bridge") {
		t.Errorf("gemini -p printed no echo of the prompt:\n%s", shown)
	}
	reqs := s.prov.Requests()
	if len(reqs) == 0 {
		t.Fatalf("the provider saw no request; the CLI printed:\n%s", shown)
	}
	s.shutdown()
	s.logs.mustContain(t, `"path":"/v1beta1/publishers/google/models/`+geminiModel+`:streamGenerateContent"`)
	if events := s.outboxEvents(t); len(events) != len(reqs) {
		t.Errorf("%d usage events for %d provider requests", len(events), len(reqs))
	}
}
