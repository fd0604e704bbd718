package openai

import (
	"bytes"
	"mime/multipart"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const formCT = "multipart/form-data; boundary=XyZ"

// form builds a multipart body with boundary XyZ from raw parts (each its
// headers, a blank line and its content), the way the SDKs write one.
func form(parts ...string) string {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString("--XyZ\r\n" + p + "\r\n")
	}
	b.WriteString("--XyZ--\r\n")
	return b.String()
}

func field(name, value string) string {
	return "Content-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value
}

// audio is a file part whose bytes hold what a careless reader could take
// for structure: CRLFs, a near-boundary, a fake model field.
var audio = "Content-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n" +
	"ID3\x00\xff\r\n--XyY\r\n" + field("model", "evil") + "\r\n\x00end"

func TestInspectForm(t *testing.T) {
	type result struct {
		Model  string
		Stream bool
		Body   string
		Code   string
	}
	run := func(ct, body string) result {
		r, berr := inspectForm([]byte(body), ct)
		if berr != nil {
			return result{Code: berr.Code}
		}
		if !r.ModelRaw {
			t.Error("ModelRaw not set")
		}
		return result{Model: r.Model, Stream: r.Stream, Body: string(r.Rewrite([]byte(body), []byte(`"prov/whisper-\u00e9"`), nil, true))}
	}
	tests := []struct {
		name, ct, body string
		want           result
	}{
		{"model rewritten, file untouched", formCT, form(audio, field("model", "demo-whisper"), field("language", "en")),
			result{Model: "demo-whisper", Body: form(audio, field("model", "prov/whisper-é"), field("language", "en"))}},
		{"model first", formCT, form(field("model", "m"), audio),
			result{Model: "m", Body: form(field("model", "prov/whisper-é"), audio)}},
		{"stream", formCT, form(audio, field("model", "m"), field("stream", "true")),
			result{Model: "m", Stream: true, Body: form(audio, field("model", "prov/whisper-é"), field("stream", "true"))}},
		{"stream false", formCT, form(field("model", "m"), field("stream", "false")),
			result{Model: "m", Body: form(field("model", "prov/whisper-é"), field("stream", "false"))}},
		{"quoted boundary", `multipart/form-data; boundary="XyZ"`, form(field("model", "m")),
			result{Model: "m", Body: form(field("model", "prov/whisper-é"))}},
		{"no closing CRLF", formCT, form(field("model", "m"))[:len(form(field("model", "m")))-2],
			result{Model: "m", Body: form(field("model", "prov/whisper-é"))[:len(form(field("model", "prov/whisper-é")))-2]}},

		{"twin model", formCT, form(field("model", "a"), audio, field("model", "b")), result{Code: "ambiguous_member"}},
		{"model in another case", formCT, form(field("model", "a"), field("Model", "b")), result{Code: "ambiguous_member"}},
		{"twin stream", formCT, form(field("model", "a"), field("stream", "false"), field("stream", "true")), result{Code: "ambiguous_member"}},
		{"no model", formCT, form(audio), result{Code: "missing_model"}},
		{"empty model", formCT, form(field("model", "")), result{Code: "invalid_model"}},
		{"model as a file", formCT, form("Content-Disposition: form-data; name=\"model\"; filename=\"m\"\r\n\r\nm"), result{Code: "invalid_model"}},
		{"encoded model", formCT, form("Content-Disposition: form-data; name=\"model\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nm"), result{Code: "invalid_model"}},
		{"stream not a boolean", formCT, form(field("model", "m"), field("stream", "1")), result{Code: "invalid_stream"}},
		{"json body", "application/json", `{"model":"m"}`, result{Code: "invalid_content_type"}},
		{"no boundary", "multipart/form-data", form(field("model", "m")), result{Code: "invalid_content_type"}},
		{"twin boundary", "multipart/form-data; boundary=XyZ; boundary=Q", form(field("model", "m")), result{Code: "invalid_content_type"}},
		{"other boundary", "multipart/form-data; boundary=Q", form(field("model", "m")), result{Code: "invalid_multipart"}},
		{"unterminated", formCT, "--XyZ\r\n" + field("model", "m"), result{Code: "invalid_multipart"}},
		{"preamble", formCT, "hello\r\n" + form(field("model", "m")), result{Code: "invalid_multipart"}},
		{"epilogue", formCT, form(field("model", "m")) + "more", result{Code: "invalid_multipart"}},
		{"LF line ends", formCT, "--XyZ\nContent-Disposition: form-data; name=\"model\"\n\nm\n--XyZ--\n", result{Code: "invalid_multipart"}},
		{"padding after boundary", formCT, "--XyZ \r\n" + field("model", "m") + "\r\n--XyZ--\r\n", result{Code: "invalid_multipart"}},
		{"no disposition", formCT, form("Content-Type: text/plain\r\n\r\nm", field("model", "m")), result{Code: "invalid_multipart"}},
		{"twin disposition", formCT, form("Content-Disposition: form-data; name=\"x\"\r\ncontent-disposition: form-data; name=\"model\"\r\n\r\nm"), result{Code: "invalid_multipart"}},
		{"bad disposition", formCT, form("Content-Disposition: form-data; name=model x\r\n\r\nm"), result{Code: "invalid_multipart"}},
		// Parameter twins: mime.ParseMediaType lets name* win, busboy and
		// Python's cgi and email read name. Each is refused, whatever
		// field it hides.
		{"twin name", formCT, form("Content-Disposition: form-data; name=\"model\"; name=\"x\"\r\n\r\nm"), result{Code: "ambiguous_member"}},
		{"equal twin name", formCT, form("Content-Disposition: form-data; name=\"model\"; name=\"model\"\r\n\r\nm"), result{Code: "ambiguous_member"}},
		{"name twin in another case", formCT, form("Content-Disposition: form-data; name=\"model\"; NAME=\"x\"\r\n\r\nm"), result{Code: "ambiguous_member"}},
		{"name and name* naming the model", formCT, form(field("model", "a"), "Content-Disposition: form-data; name=\"yyy\"; name*=UTF-8''model\r\n\r\nb"), result{Code: "ambiguous_member"}},
		{"name and name* hiding the model", formCT, form("Content-Disposition: form-data; name=\"model\"; name*=UTF-8''zzz\r\n\r\na", field("x", "b")), result{Code: "ambiguous_member"}},
		{"name* hiding stream", formCT, form(field("model", "m"), "Content-Disposition: form-data; name=\"yyy\"; name*=UTF-8''stream\r\n\r\ntrue"), result{Code: "ambiguous_member"}},
		{"name* alone", formCT, form(field("model", "m"), "Content-Disposition: form-data; name*=UTF-8''stream\r\n\r\ntrue"), result{Code: "ambiguous_member"}},
		{"name continuation", formCT, form("Content-Disposition: form-data; name*0=mo; name*1=del\r\n\r\nm"), result{Code: "ambiguous_member"}},
		{"twin filename", formCT, form(field("model", "m"), "Content-Disposition: form-data; name=\"file\"; filename=\"a\"; filename=\"b\"\r\n\r\nx"), result{Code: "ambiguous_member"}},
		{"filename and filename*", formCT, form(field("model", "m"), "Content-Disposition: form-data; name=\"file\"; filename=\"a\"; filename*=UTF-8''b\r\n\r\nx"), result{Code: "ambiguous_member"}},
		{"twin unknown parameter", formCT, form(field("model", "m"), "Content-Disposition: form-data; name=\"x\"; a=1; A=2\r\n\r\nx"), result{Code: "ambiguous_member"}},
		{"backslash in a name", formCT, form("Content-Disposition: form-data; name=\"mod\\el\"\r\n\r\nm", field("model", "m")), result{Code: "ambiguous_member"}},
		{"escaped quote hiding a name", formCT, form(field("model", "m"), "Content-Disposition: form-data; name=\"f\"; filename=\"a\\\"; name=\"stream\"\r\n\r\ntrue"), result{Code: "ambiguous_member"}},
		{"folded twin", formCT, form("Content-Disposition: form-data; name=\"x\";\r\n name=\"model\"\r\n\r\nm"), result{Code: "ambiguous_member"}},
		{"unterminated quote", formCT, form("Content-Disposition: form-data; name=\"model\r\n\r\nm"), result{Code: "invalid_multipart"}},
		{"empty name", formCT, form("Content-Disposition: form-data; name=\"\"\r\n\r\nm", field("model", "m")), result{Code: "invalid_multipart"}},
		{"not form-data", formCT, form("Content-Disposition: attachment; name=\"model\"\r\n\r\nm"), result{Code: "invalid_multipart"}},
		{"plain variations", formCT, form("Content-Disposition: Form-Data ;\tNAME = upload ; filename=\"C:\\x\\a.mp3\";\r\n\r\nf", field("stream", "false"), field("model", "m")),
			result{Model: "m", Body: form("Content-Disposition: Form-Data ;\tNAME = upload ; filename=\"C:\\x\\a.mp3\";\r\n\r\nf", field("stream", "false"), field("model", "prov/whisper-é"))}},
		{"empty", formCT, "", result{Code: "invalid_multipart"}},
		{"delimiter in the headers", formCT, "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n--XyZ\r\n\r\nm\r\n--XyZ--\r\n", result{Code: "invalid_multipart"}},
		// RFC 2046: the delimiter never occurs inside a part. Readers
		// differ on "--XyZx" (mime/multipart reads on, others cut): refused.
		{"boundary inside a part", formCT, form(field("note", "a\r\n--XyZx"), field("model", "m")), result{Code: "invalid_multipart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(run(tt.ct, tt.body), tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

// TestInspectFormSDKBody: a body written by mime/multipart (as the
// official SDKs' are) is read, and only the model's bytes change.
func TestInspectFormSDKBody(t *testing.T) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", "speech.wav")
	file := bytes.Repeat([]byte("RIFF\r\n--\x00\xff"), 1000)
	_, _ = fw.Write(file)
	_ = mw.WriteField("model", "demo-whisper")
	_ = mw.WriteField("response_format", "json")
	_ = mw.Close()
	body := b.Bytes()
	r, berr := inspectForm(body, mw.FormDataContentType())
	if berr != nil {
		t.Fatal(berr)
	}
	out := r.Rewrite(body, []byte(`"whisper-1"`), nil, true)
	if want := bytes.Replace(body, []byte("\r\n\r\ndemo-whisper\r\n"), []byte("\r\n\r\nwhisper-1\r\n"), 1); !bytes.Equal(out, want) {
		t.Errorf("rewrite changed more than the model")
	}
	mr := multipart.NewReader(bytes.NewReader(out), mw.Boundary())
	f, err := mr.ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	fh, _ := f.File["file"][0].Open()
	var got bytes.Buffer
	_, _ = got.ReadFrom(fh)
	if !bytes.Equal(got.Bytes(), file) || f.Value["model"][0] != "whisper-1" || f.Value["response_format"][0] != "json" {
		t.Errorf("the rewritten form reads file %d bytes, model %q", got.Len(), f.Value["model"])
	}
}

// FuzzInspectForm: whatever the body, an accepted one is a form that
// mime/multipart reads with exactly one model field, the value Inspect
// found; and rewriting it changes that value only: the rewritten body
// reads back with the new model and every other part's bytes as before.
func FuzzInspectForm(f *testing.F) {
	f.Add([]byte(form(audio, field("model", "demo-whisper"), field("stream", "true"))))
	f.Add([]byte(form(field("model", "a"), field("model", "b"))))
	f.Add([]byte("--XyZ\r\n\r\n\r\n--XyZ--"))
	f.Add([]byte(form("Content-Disposition: form-data; name=\"model\"\r\nX: y\r\n\r\nm\r\n--XyZ")))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, berr := inspectForm(body, formCT)
		if berr != nil {
			return
		}
		before := readForm(t, body)
		if before == nil {
			t.Fatalf("accepted a body mime/multipart refuses: %q", body)
		}
		if len(before["model"]) != 1 || before["model"][0] != r.Model {
			t.Fatalf("model %q, mime/multipart reads %q", r.Model, before["model"])
		}
		out := r.Rewrite(body, []byte(`"NEW"`), nil, true)
		after := readForm(t, out)
		if after == nil || len(after["model"]) != 1 || after["model"][0] != "NEW" {
			t.Fatalf("rewritten body reads model %q", after["model"])
		}
		after["model"], before["model"] = nil, nil
		if diff := cmp.Diff(after, before); diff != "" {
			t.Fatalf("rewrite changed other parts (-after +before)\n%s", diff)
		}
	})
}

// readForm reads every part of body with mime/multipart (raw, boundary
// XyZ): name → contents, in order; nil when it fails.
func readForm(t *testing.T, body []byte) map[string][]string {
	t.Helper()
	mr := multipart.NewReader(bytes.NewReader(body), "XyZ")
	out := map[string][]string{}
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			return nil
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(p); err != nil {
			return nil
		}
		out[p.FormName()] = append(out[p.FormName()], b.String())
	}
}
