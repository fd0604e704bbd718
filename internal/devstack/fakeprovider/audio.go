package fakeprovider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
)

// audioForm is what the fake reads of a transcription or translation
// form: the fields that shape its answer and the uploaded file's size.
type audioForm struct {
	model, prompt, format string
	stream                bool
	fileSize              int
}

// parseAudioForm reads a multipart/form-data body as OpenAI's audio
// endpoints take it.
func parseAudioForm(body []byte, contentType string) (audioForm, error) {
	var f audioForm
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return f, errors.New("not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return f, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return f, err
		}
		switch p.FormName() {
		case "file":
			f.fileSize = len(data)
		case "model":
			f.model = string(data)
		case "prompt":
			f.prompt = string(data)
		case "response_format":
			f.format = string(data)
		case "stream":
			f.stream = string(data) == "true"
		}
	}
}

// transcriptUsage is gpt-4o-transcribe's usage object: input_tokens =
// the file's bytes, output_tokens = the words of the text.
type transcriptUsage struct {
	Type         string `json:"type"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	TotalTokens  int    `json:"total_tokens"`
}

// writeAudioText answers a transcription ("transcribed N bytes", N the
// uploaded file's size, with usage) or a translation ("translated N
// bytes", without usage, as OpenAI's): JSON, plain text with
// response_format text, or, for a transcription with stream=true, SSE
// transcript.text.delta events and a transcript.text.done with the usage.
func (p *Provider) writeAudioText(w http.ResponseWriter, r *http.Request, k kind, b Behaviour, rp reply) {
	verb := "transcribed"
	if k == kindTranslate {
		verb = "translated"
	}
	text := fmt.Sprintf("%s %d bytes", verb, rp.audio.fileSize)
	usage := &transcriptUsage{Type: "tokens", InputTokens: rp.audio.fileSize, OutputTokens: 3, TotalTokens: rp.audio.fileSize + 3}
	if k == kindTranslate {
		usage = nil
	}
	if rp.audio.stream && k == kindTranscribe {
		type delta struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		var events []event
		for _, piece := range split(text, b.Chunks) {
			events = append(events, event{data: mustJSON(delta{"transcript.text.delta", piece})})
		}
		events = append(events, event{data: mustJSON(struct {
			Type  string           `json:"type"`
			Text  string           `json:"text"`
			Usage *transcriptUsage `json:"usage"`
		}{"transcript.text.done", text, usage})})
		writeStream(r.Context(), w, b, events, openAIErrorEvent())
		return
	}
	if rp.audio.format == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeBody(w, http.StatusOK, []byte(text+"\n"), b.Cut)
		return
	}
	writeBody(w, http.StatusOK, mustJSON(struct {
		Text  string           `json:"text"`
		Usage *transcriptUsage `json:"usage,omitempty"`
	}{text, usage}), b.Cut)
}
