package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestCompletionsSDK: the legacy Completions endpoint (fill-in-the-middle
// clients) works through the node with the official SDK, whole and
// streamed; the provider sees its own model, the prompt and suffix as sent,
// and, for the stream, include_usage the node asked for. Each call leaves
// a usage event with the provider's counts.
func TestCompletionsSDK(t *testing.T) { runCompletionsSDK(t, startStack(t, stackOptions{})) }

func runCompletionsSDK(t *testing.T, s *stack) {
	t.Helper()
	oc := openAIClient(s, clientKey)
	ctx := t.Context()
	params := openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(openAIModel),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("def add(a, b):")},
		Suffix: openai.String("\nprint(add(1, 2))"),
	}

	res, err := oc.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("Completions.New: %v", err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Text != "echo: def add(a, b):" || res.Choices[0].FinishReason != "stop" {
		t.Errorf("choices = %+v", res.Choices)
	}
	if res.Usage.PromptTokens != 3 {
		t.Errorf("usage = %+v", res.Usage)
	}
	last := lastRequest(t, s)
	if last.Path != "/v1/completions" || last.Model != openAIProvModel || !strings.Contains(last.Body, `"suffix":"\nprint(add(1, 2))"`) {
		t.Errorf("provider saw %s model %q body %s", last.Path, last.Model, last.Body)
	}

	st := oc.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	chunks := 0
	for st.Next() {
		c := st.Current()
		chunks++
		if len(c.Choices) == 0 {
			t.Errorf("chunk %d without choices reached the client: %+v", chunks, c)
			continue
		}
		text.WriteString(c.Choices[0].Text)
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != "echo: def add(a, b):" {
		t.Errorf("streamed text %q", text.String())
	}
	if last := lastRequest(t, s); !last.Stream || !strings.Contains(last.Body, `"include_usage":true`) {
		t.Errorf("provider stream body %s, want include_usage asked for", last.Body)
	}

	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint != usageevent.EndpointCompletions {
			continue
		}
		if ev.Usage == nil || ev.Usage.InputTokens != 3 || ev.Usage.OutputTokens != 3 {
			t.Errorf("event stream=%v usage %+v, want 3 in, 3 out", ev.Stream, ev.Usage)
		}
		got = append(got, ev.Protocol+" "+ev.PublicModel+" "+ev.ProviderModel)
	}
	if len(got) != 2 {
		t.Errorf("completions events %q, want 2", got)
	}
}

// TestRerank: POST /v1/rerank and /v2/rerank reach the backend's
// {base_url}/rerank with the model rewritten and every other byte as
// sent; the usage event has the tokens and the provider's object as it
// came (Cohere's billed_units shape: TestRerankBodyUsage).
func TestRerank(t *testing.T) { runRerank(t, startStack(t, stackOptions{})) }

func runRerank(t *testing.T, s *stack) {
	t.Helper()
	body := `{"model":"demo-gpt","query":"best fruit","documents":["apple pie","banana",{"text":"cherry tart"}],"top_n":2}`
	for _, path := range []string{"/v1/rerank", "/v2/rerank"} {
		r := s.do(http.MethodPost, path, bearer(clientKey), body)
		if r.status != 200 || !strings.Contains(r.body, `"results":[{"index":0,`) {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		last := lastRequest(t, s)
		if want := strings.Replace(body, `"demo-gpt"`, `"`+openAIProvModel+`"`, 1); last.Path != "/v1/rerank" || last.Body != want {
			t.Errorf("%s: provider saw %s %s, want /v1/rerank %s", path, last.Path, last.Body, want)
		}
	}
	if r := s.do(http.MethodPost, "/v1/rerank", bearer(clientKey), `{"query":"q","documents":["a"]}`); r.status != 400 {
		t.Errorf("rerank without a model: %d %s, want 400", r.status, r.body)
	}

	s.shutdown()
	var got []string
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint != usageevent.EndpointRerank || ev.Usage == nil {
			continue
		}
		got = append(got, fmt.Sprintf("in=%d out=%d %s", ev.Usage.InputTokens, ev.Usage.OutputTokens, ev.ProviderUsage))
	}
	want := []string{`in=7 out=0 {"total_tokens":7}`, `in=7 out=0 {"total_tokens":7}`}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("rerank usage events (-got +want)\n%s", diff)
	}
}

// TestAudioSpeechSDK: the speech answer reaches the official SDK byte for
// byte with its Content-Type, relayed as it came (the fake sends it
// chunked, without a length); its usage event says the usage is unknown.
// A provider that drops the connection halfway must not look like a
// complete answer: the client sees the connection cut.
func TestAudioSpeechSDK(t *testing.T) { runAudioSpeechSDK(t, startStack(t, stackOptions{})) }

func runAudioSpeechSDK(t *testing.T, s *stack) {
	t.Helper()
	oc := openAIClient(s, clientKey)
	ctx := t.Context()
	speech := func(input string) (*http.Response, error) {
		return oc.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{
			Model: openai.SpeechModel(openAIModel),
			Input: input,
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")},
		})
	}
	resp, err := speech("hello audio")
	if err != nil {
		t.Fatalf("Audio.Speech.New: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "ID3\x04\x00\x00\x00\x00\x00\x00fake-audio:echo: hello audio"
	if err != nil || string(got) != want || resp.Header.Get("Content-Type") != "audio/mpeg" {
		t.Errorf("speech %q (%v), Content-Type %q; want %q audio/mpeg", got, err, resp.Header.Get("Content-Type"), want)
	}
	if last := lastRequest(t, s); last.Path != "/v1/audio/speech" || last.Model != openAIProvModel {
		t.Errorf("provider saw %s model %q", last.Path, last.Model)
	}

	resp, err = speech("cut me [[cut=after_events:0]]")
	if err != nil {
		t.Fatalf("Audio.Speech.New (cut): %v", err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("a cut speech answer read as complete: %q", got)
	}

	s.shutdown()
	var events []string
	for _, ev := range s.outboxEvents(t) {
		if ev.Endpoint != usageevent.EndpointAudioSpeech {
			continue
		}
		events = append(events, fmt.Sprintf("%d %s usage=%v raw=%s", ev.HTTPStatus, ev.FailureStage, ev.Usage, ev.ProviderUsage))
	}
	wantEvents := []string{"200  usage=<nil> raw=", "200 stream usage=<nil> raw="}
	if diff := cmp.Diff(events, wantEvents); diff != "" {
		t.Errorf("speech events (-got +want)\n%s", diff)
	}
}

// TestAudioTranscriptionSDK: a real multipart upload from the official
// SDK reaches the provider with only the model field's value changed (the
// file's bytes, the other fields and the boundary as sent), whole and
// streamed; translations take the same form. Usage events carry the
// transcription's usage; a twin model field or a malformed body is a 400
// that never leaves the node.
func TestAudioTranscriptionSDK(t *testing.T) {
	runAudioTranscriptionSDK(t, startStack(t, stackOptions{}))
}

func runAudioTranscriptionSDK(t *testing.T, s *stack) {
	t.Helper()
	oc := openAIClient(s, clientKey)
	ctx := t.Context()
	audio := bytes.Repeat([]byte("RIFF\r\n--\x00\xffWAVE"), 300) // 4200 bytes
	params := func() openai.AudioTranscriptionNewParams {
		return openai.AudioTranscriptionNewParams{
			File:     openai.File(bytes.NewReader(audio), "hello.wav", "audio/wav"),
			Model:    openai.AudioModel(openAIModel),
			Language: openai.String("en"),
		}
	}
	res, err := oc.Audio.Transcriptions.New(ctx, params())
	if err != nil {
		t.Fatalf("Transcriptions.New: %v", err)
	}
	if res.Text != "transcribed 4200 bytes" {
		t.Errorf("text %q", res.Text)
	}
	last := s.prov.Requests()[len(s.prov.Requests())-1]
	if last.Path != "/v1/audio/transcriptions" || last.Model != openAIProvModel {
		t.Errorf("provider saw %s model %q", last.Path, last.Model)
	}
	// Put the public model back: the body must then be the client's.
	_, params2, _ := mime.ParseMediaType(last.Header.Get("Content-Type"))
	mr := multipart.NewReader(bytes.NewReader(last.Body), params2["boundary"])
	var names []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(p)
		names = append(names, p.FormName())
		if p.FormName() == "file" && !bytes.Equal(data, audio) {
			t.Error("the file's bytes changed on the way")
		}
	}
	if diff := cmp.Diff(names, []string{"file", "language", "model"}); diff != "" {
		t.Errorf("provider's form fields (-got +want)\n%s", diff)
	}
	if n := bytes.Count(last.Body, []byte(openAIModel)); n != 0 {
		t.Errorf("the public model is still in the provider's body")
	}

	st := oc.Audio.Transcriptions.NewStreaming(ctx, params())
	var text strings.Builder
	var done openai.TranscriptionStreamEventUnion
	for st.Next() {
		ev := st.Current()
		if ev.Type == "transcript.text.delta" {
			text.WriteString(ev.Delta)
		}
		done = ev
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text.String() != "transcribed 4200 bytes" || done.Type != "transcript.text.done" {
		t.Errorf("streamed %q, last event %q", text.String(), done.Type)
	}

	// Translations as curl -F sends them (the SDK's method is deprecated).
	var tb bytes.Buffer
	mw := multipart.NewWriter(&tb)
	fw, _ := mw.CreateFormFile("file", "hola.wav")
	_, _ = fw.Write(audio[:100])
	_ = mw.WriteField("model", openAIModel)
	_ = mw.Close()
	if r := s.do(http.MethodPost, "/v1/audio/translations", map[string]string{"Authorization": "Bearer " + clientKey, "Content-Type": mw.FormDataContentType()},
		tb.String()); r.status != 200 || !strings.Contains(r.body, `"text":"translated 100 bytes"`) {
		t.Errorf("translation: %d %s", r.status, r.body)
	}

	before := s.prov.RequestCount()
	formCT := map[string]string{"Authorization": "Bearer " + clientKey, "Content-Type": "multipart/form-data; boundary=B"}
	field := func(name, v string) string {
		return "--B\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + v + "\r\n"
	}
	for name, body := range map[string]string{
		"twin model":    field("model", openAIModel) + field("model", "other") + "--B--\r\n",
		"missing model": field("language", "en") + "--B--\r\n",
		"malformed":     field("model", openAIModel),
	} {
		if r := s.do(http.MethodPost, "/v1/audio/transcriptions", formCT, body); r.status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
		}
	}
	if n := s.prov.RequestCount(); n != before {
		t.Errorf("refused forms reached the provider (%d requests)", n-before)
	}

	s.shutdown()
	events := eventSummaries(s.outboxEvents(t), usageevent.EndpointAudioTranscriptions, usageevent.EndpointAudioTranslations)
	want := []string{
		"audio_transcriptions stream=false in=4200 out=3",
		"audio_transcriptions stream=true in=4200 out=3",
		"audio_translations stream=false <nil>",
	}
	if diff := cmp.Diff(events, want); diff != "" {
		t.Errorf("audio events (-got +want)\n%s", diff)
	}
}

// TestStoredObjectEndpoints404: files, uploads, batches and custom voices
// live in the provider account that created them: a clear 404 that says
// why, in the OpenAI shape the SDK reads, and nothing reaches a provider.
func TestStoredObjectEndpoints404(t *testing.T) {
	s := startStack(t, stackOptions{})
	oc := openAIClient(s, clientKey)
	_, err := oc.Files.List(t.Context(), openai.FileListParams{})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != "stateful_endpoint_not_supported" {
		t.Errorf("Files.List: %v, want a 404 stateful_endpoint_not_supported", err)
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/files"}, {"GET", "/v1/files/file-abc/content"}, {"POST", "/v1/uploads"},
		{"POST", "/v1/batches"}, {"GET", "/v1/batches/batch_abc"}, {"GET", "/v1/audio/voices"},
	} {
		r := s.do(c.method, c.path, bearer(clientKey), "{}")
		if r.status != 404 || !strings.Contains(r.body, "stateful_endpoint_not_supported") || !strings.Contains(r.body, "provider account that created them") {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}

// TestImagesSDK: image generation (JSON, and streamed) and an image edit
// (a multipart upload: only the model field rewritten, the image's bytes
// as sent) through the official SDK; usage events carry the usage.
func TestImagesSDK(t *testing.T) { runImagesSDK(t, startStack(t, stackOptions{})) }

func runImagesSDK(t *testing.T, s *stack) {
	t.Helper()
	oc := openAIClient(s, clientKey)
	ctx := t.Context()
	gen := openai.ImageGenerateParams{Model: openai.ImageModel(openAIModel), Prompt: "a red scooter"}
	res, err := oc.Images.Generate(ctx, gen)
	if err != nil {
		t.Fatalf("Images.Generate: %v", err)
	}
	if len(res.Data) != 1 || res.Data[0].B64JSON == "" || res.Usage.InputTokens != 3 {
		t.Errorf("Generate = %d images, usage %+v", len(res.Data), res.Usage)
	}
	if last := lastRequest(t, s); last.Path != "/v1/images/generations" || last.Model != openAIProvModel {
		t.Errorf("provider saw %s model %q", last.Path, last.Model)
	}
	st := oc.Images.GenerateStreaming(ctx, gen)
	var types []string
	for st.Next() {
		types = append(types, st.Current().Type)
	}
	if err := st.Err(); err != nil || len(types) == 0 || types[len(types)-1] != "image_generation.completed" {
		t.Errorf("stream events %v, err %v", types, err)
	}

	png := bytes.Repeat([]byte("\x89PNG\r\n\x1a\n--"), 50) // 500 bytes
	ed, err := oc.Images.Edit(ctx, openai.ImageEditParams{
		Model:  openai.ImageModel(openAIModel),
		Prompt: "make it blue",
		Image:  openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader(png), "in.png", "image/png")},
	})
	if err != nil {
		t.Fatalf("Images.Edit: %v", err)
	}
	if len(ed.Data) != 1 || ed.Usage.InputTokens != 3 {
		t.Errorf("Edit = %+v", ed)
	}
	last := s.prov.Requests()[len(s.prov.Requests())-1]
	if last.Path != "/v1/images/edits" || last.Model != openAIProvModel || !bytes.Contains(last.Body, png) {
		t.Errorf("provider saw %s model %q, image bytes intact %v", last.Path, last.Model, bytes.Contains(last.Body, png))
	}

	s.shutdown()
	events := eventSummaries(s.outboxEvents(t), usageevent.EndpointImageGenerations, usageevent.EndpointImageEdits)
	want := []string{
		"image_generations stream=false in=3 out=4",
		"image_generations stream=true in=3 out=4",
		"image_edits stream=false in=3 out=4",
	}
	if diff := cmp.Diff(events, want); diff != "" {
		t.Errorf("image events (-got +want)\n%s", diff)
	}
}

// TestSurfaceThroughRealProxies runs the SDK tests of the endpoints above
// through Debian's dante-server (SOCKS5) and tinyproxy (HTTP CONNECT, with
// Basic auth), each on a node of its own: loud skip on a developer box,
// required in CI.
func TestSurfaceThroughRealProxies(t *testing.T) {
	suites := []struct {
		name string
		run  func(*testing.T, *stack)
	}{
		{"completions", runCompletionsSDK}, {"rerank", runRerank}, {"speech", runAudioSpeechSDK},
		{"transcription", runAudioTranscriptionSDK}, {"images", runImagesSDK},
	}
	for _, proxy := range []struct{ name, env, what, scheme string }{
		{"dante", "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)", "socks5://"},
		{"tinyproxy", "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)", ""},
	} {
		t.Run(proxy.name, func(t *testing.T) {
			u := proxy.scheme + requireDaemon(t, proxy.env, proxy.what)
			for _, suite := range suites {
				t.Run(suite.name, func(t *testing.T) { suite.run(t, startStack(t, stackOptions{proxyURL: u})) })
			}
		})
	}
}

// eventSummaries sums up the usage events of the given endpoints, in
// outbox order, as "endpoint stream=… in=… out=…" ("<nil>" without usage).
func eventSummaries(evs []*usageevent.Event, endpoints ...string) []string {
	var out []string
	for _, ev := range evs {
		if !slices.Contains(endpoints, ev.Endpoint) {
			continue
		}
		u := "<nil>"
		if ev.Usage != nil {
			u = fmt.Sprintf("in=%d out=%d", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		}
		out = append(out, fmt.Sprintf("%s stream=%v %s", ev.Endpoint, ev.Stream, u))
	}
	return out
}
