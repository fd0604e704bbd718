package fakeprovider

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
)

// audioForm is what the fake reads of a transcription, translation or
// image edit form: the fields that shape its answer and the size of the
// uploaded files.
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
		if p.FileName() != "" { // the audio file, or the images to edit
			f.fileSize += len(data)
			continue
		}
		switch p.FormName() {
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

// imageUsage is gpt-image-1's usage object: input_tokens = the prompt's
// words, output_tokens = 4.
type imageUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// writeImage answers an image generation or edit: one image whose
// base64 bytes are "fake-image:" and the reply text (an edit adds the
// size of the uploaded images), with usage; with stream, SSE
// image_generation.partial_image (image_edit.* for an edit) events, one
// per piece, and a .completed event with the image and the usage.
func writeImage(w http.ResponseWriter, r *http.Request, k kind, b Behaviour, rp reply) {
	text := "fake-image:" + rp.text()
	prefix := "image_generation"
	if k == kindImageEdit {
		text += fmt.Sprintf(" (%d bytes in)", rp.audio.fileSize)
		prefix = "image_edit"
	}
	img := base64.StdEncoding.EncodeToString([]byte(text))
	usage := imageUsage{InputTokens: rp.words, OutputTokens: 4, TotalTokens: rp.words + 4}
	if rp.stream {
		type partial struct {
			Type              string `json:"type"`
			B64JSON           string `json:"b64_json"`
			PartialImageIndex int    `json:"partial_image_index"`
		}
		var events []event
		for i, piece := range split(text, b.Chunks) {
			events = append(events, event{name: prefix + ".partial_image", data: mustJSON(partial{prefix + ".partial_image", base64.StdEncoding.EncodeToString([]byte(piece)), i})})
		}
		events = append(events, event{name: prefix + ".completed", data: mustJSON(struct {
			Type    string     `json:"type"`
			B64JSON string     `json:"b64_json"`
			Usage   imageUsage `json:"usage"`
		}{prefix + ".completed", img, usage})})
		writeStream(r.Context(), w, b, events, openAIErrorEvent())
		return
	}
	type datum struct {
		B64JSON string `json:"b64_json"`
	}
	writeBody(w, http.StatusOK, mustJSON(struct {
		Created int64      `json:"created"`
		Data    []datum    `json:"data"`
		Usage   imageUsage `json:"usage"`
	}{rp.created.Unix(), []datum{{img}}, usage}), b.Cut)
}
