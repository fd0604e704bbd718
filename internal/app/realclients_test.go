package app

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// requireAgent returns the path of a coding agent the test runs, skipping
// loudly when it is absent, unless SCOOTGATE_REQUIRE_DAEMONS=1 (CI, where
// scripts/ci-agents.sh installs it from npm), where absence fails.
func requireAgent(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " is not installed (npm package " + pkg + "; scripts/ci-agents.sh installs it)"
	if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
		t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

// TestGeminiCLI: Google's Gemini CLI, unchanged, answers a prompt through
// the node with nothing but its two documented environment variables
// (GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY) and an API-key login: the
// provider sees its own model and key, and the attempt is one usage event
// of the Gemini protocol.
func TestGeminiCLI(t *testing.T) {
	bin := requireAgent(t, "gemini", "@google/gemini-cli")
	s := startStack(t, stackOptions{gemini: true})

	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The CLI asks which login to use on first start; this is the answer
	// "use a Gemini API key", as its settings file stores it.
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"disableAutoUpdate":true},"privacy":{"usageStatisticsEnabled":false}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-m", geminiModel, "-p", "repeat after me: blue harbour lights")
	cmd.Dir = work
	cmd.Env = []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"GOOGLE_GEMINI_BASE_URL=" + s.api,
		"GEMINI_API_KEY=" + clientKey,
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"NO_COLOR=1",
		"CI=1",
	}
	out, err := cmd.CombinedOutput()
	// The client key is the test's own; still, never print it.
	shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
	if err != nil {
		t.Fatalf("gemini -p: %v\n%s", err, shown)
	}
	if !strings.Contains(shown, "blue harbour lights") {
		t.Errorf("gemini -p printed no echo of the prompt:\n%s", shown)
	}

	reqs := s.prov.Requests()
	if len(reqs) == 0 {
		t.Fatalf("the provider saw no request; the CLI printed:\n%s", shown)
	}
	for _, r := range reqs {
		if !strings.Contains(r.Path, "/models/"+geminiProvModel+":") || r.Header.Get("X-Goog-Api-Key") != geminiProvKey {
			t.Errorf("the provider saw %s with another key or model", r.Path)
		}
	}
	t.Logf("gemini -p made %d provider requests; it printed:\n%s", len(reqs), shown)
	s.shutdown()
	var stream int
	for _, ev := range s.outboxEvents(t) {
		if ev.Protocol != usageevent.ProtocolGemini {
			t.Errorf("event of protocol %s", ev.Protocol)
		}
		if ev.Endpoint == usageevent.EndpointStreamGenerateContent && ev.FailureStage == "" {
			stream++
		}
	}
	if stream == 0 {
		t.Errorf("no completed stream_generate_content event; the provider saw %d requests", len(reqs))
	}
}

// nodeSDKPrefix is where scripts/ci-agents.sh installs the OpenAI Node SDK.
const nodeSDKPrefix = "/opt/scootgate-node"

// TestAudioTranscriptionNodeSDK: the OpenAI Node SDK builds its multipart
// upload its own way (its own boundary, a file streamed from disk); the
// node routes on its model field, the provider gets the file's bytes
// unchanged and its own model, and the SDK reads the answer.
func TestAudioTranscriptionNodeSDK(t *testing.T) {
	node := requireAgent(t, "node", "nodejs")
	sdk := filepath.Join(nodeSDKPrefix, "node_modules")
	if _, err := os.Stat(filepath.Join(sdk, "openai", "package.json")); err != nil {
		msg := "the OpenAI Node SDK is not installed in " + nodeSDKPrefix + " (scripts/ci-agents.sh installs it)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	s := startStack(t, stackOptions{})
	dir := t.TempDir()
	audio := bytes.Repeat([]byte("RIFF\r\n--\x00\xffWAVE"), 700) // 9800 bytes, boundary-like bytes included
	wav := filepath.Join(dir, "hello.wav")
	if err := os.WriteFile(wav, audio, 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "transcribe.cjs")
	if err := os.WriteFile(script, []byte(`const OpenAI = require('openai');
const fs = require('fs');
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE, apiKey: process.env.KEY, maxRetries: 0 });
  const r = await client.audio.transcriptions.create({ file: fs.createReadStream(process.env.FILE), model: process.env.MODEL });
  process.stdout.write(JSON.stringify(r));
})().catch((e) => { console.error(String(e)); process.exit(1); });
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_PATH=" + sdk, "BASE=" + s.api + "/v1", "KEY=" + clientKey, "FILE=" + wav, "MODEL=" + openAIModel}
	out, err := cmd.CombinedOutput()
	shown := strings.ReplaceAll(string(out), clientKey, "<client key>")
	if err != nil {
		t.Fatalf("node: %v\n%s", err, shown)
	}
	if !strings.Contains(shown, `"text":"transcribed 9800 bytes"`) {
		t.Errorf("the SDK read %s", shown)
	}
	reqs := s.prov.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/v1/audio/transcriptions" || last.Model != openAIProvModel {
		t.Fatalf("the provider saw %s, model %q", last.Path, last.Model)
	}
	_, params, _ := mime.ParseMediaType(last.Header.Get("Content-Type"))
	mr := multipart.NewReader(bytes.NewReader(last.Body), params["boundary"])
	found := false
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(p)
		if p.FormName() == "file" {
			found = true
			if !bytes.Equal(data, audio) {
				t.Error("the file's bytes changed on the way")
			}
		}
	}
	if !found {
		t.Error("no file part reached the provider")
	}
}
