package openai

import "testing"

// BenchmarkInspectForm is the inspection of an SDK-shaped transcription
// upload: a file part with a filename and a content type, the model and
// two plain fields, every part's Content-Disposition decoded.
func BenchmarkInspectForm(b *testing.B) {
	body := []byte(form(audio, field("model", "demo-whisper"), field("response_format", "json"), field("stream", "false")))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if r, berr := inspectForm(body, formCT); berr != nil || r.Model != "demo-whisper" {
			b.Fatalf("inspectForm = %+v, %v", r, berr)
		}
	}
}
