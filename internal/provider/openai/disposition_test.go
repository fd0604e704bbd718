package openai

import (
	"mime"
	"strings"
	"testing"
)

// TestParseDisposition: the disposition reader's answers, each part of
// its grammar, and the message naming the part a refusal is about.
func TestParseDisposition(t *testing.T) {
	tests := []struct {
		in   string
		want disposition
		code string
	}{
		{`form-data; name="model"`, disposition{name: "model"}, ""},
		{`form-data; name=model`, disposition{name: "model"}, ""},
		{`FORM-DATA;NAME="a b";FILENAME=""`, disposition{name: "a b", file: true}, ""},
		{"form-data; name=\"f\"; filename=\"\u00e9.mp3\"; size=3;", disposition{name: "f", file: true}, ""},
		{`form-data; name="a;b=c"`, disposition{name: "a;b=c"}, ""},
		{`form-data; filename="x\y"; name=f`, disposition{name: "f", file: true}, ""},
		{`form-data; name="a"; name*=UTF-8''b`, disposition{}, "ambiguous_member"},
		{`form-data; name*=UTF-8''b; name="a"`, disposition{}, "ambiguous_member"},
		{`form-data; name="a"; filename*=UTF-8''b`, disposition{}, "ambiguous_member"},
		{`form-data; name="a"; filename*0="b"`, disposition{}, "ambiguous_member"},
		{`form-data; name="a"; Name="a"`, disposition{}, "ambiguous_member"},
		{`form-data; name="a\"b"`, disposition{}, "ambiguous_member"},
		{`form-data; name="a"; filename="b\\"`, disposition{}, "ambiguous_member"},
		{`form-data; name="a\b"`, disposition{}, "ambiguous_member"},
		{`form-data`, disposition{}, "invalid_multipart"},
		{`form-data; filename="a"`, disposition{}, "invalid_multipart"},
		{`form-data; name=`, disposition{}, "invalid_multipart"},
		{`form-data; name`, disposition{}, "invalid_multipart"},
		{`form-data name="a"`, disposition{}, "invalid_multipart"},
		{`form-data; name="a"x`, disposition{}, "invalid_multipart"},
		{`form-data; name=a/b`, disposition{}, "invalid_multipart"},
		{"form-data; name=\"a\x00\"", disposition{}, "invalid_multipart"},
		{"form-data;\u00a0name=a", disposition{}, "invalid_multipart"},
		{`form-data; a=1; b=1; c=1; d=1; e=1; f=1; g=1; h=1; name=x`, disposition{}, "invalid_multipart"},
		{`inline; name="a"`, disposition{}, "invalid_multipart"},
	}
	for _, tt := range tests {
		got, berr := parseDisposition(tt.in)
		code := ""
		if berr != nil {
			code, got = berr.Code, disposition{}
		}
		if got != tt.want || code != tt.code {
			t.Errorf("parseDisposition(%q) = %+v, %q; want %+v, %q", tt.in, got, code, tt.want, tt.code)
		}
	}
	_, berr := inspectForm([]byte(form(field("model", "m"), "Content-Disposition: form-data; name=\"y\"; name*=UTF-8''model\r\n\r\nb")), formCT)
	if berr == nil || !strings.Contains(berr.Msg, "form part 2:") || !strings.Contains(berr.Msg, `"name*"`) {
		t.Errorf("the refusal does not name the part and the parameter: %v", berr)
	}
}

// FuzzParseDisposition: a disposition the reader accepts is one
// mime.ParseMediaType reads the same way (type form-data, the same field
// name, a filename exactly when the reader saw one), with no parameter a
// reader that keeps the first of twins (busboy, Python's cgi) could read
// otherwise: no twin, no extended parameter.
func FuzzParseDisposition(f *testing.F) {
	for _, s := range []string{
		`form-data; name="model"`, `form-data; name="a"; name*=UTF-8''model`, `form-data; name="f"; filename="a.mp3"`,
		`form-data; name="a"; filename="b\"; name="model"`, `Form-Data ;NAME = x ; filename="C:\x\a";`,
		`form-data; name="a"; NAME="a"`, `form-data; name*0=mo; name*1=del`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, berr := parseDisposition(v)
		if berr != nil {
			if berr.Code != "ambiguous_member" && berr.Code != "invalid_multipart" {
				t.Fatalf("code %q", berr.Code)
			}
			return
		}
		typ, params, err := mime.ParseMediaType(v)
		if err != nil || typ != "form-data" {
			t.Fatalf("accepted %q, mime.ParseMediaType reads %q, %v", v, typ, err)
		}
		_, file := params["filename"]
		if d.name == "" || params["name"] != d.name || file != d.file {
			t.Fatalf("%q: read %+v, mime.ParseMediaType %v", v, d, params)
		}
		// mime.ParseMediaType drops what it merged; every key it kept is
		// one the reader accepted once, and none is extended.
		for k := range params {
			if strings.Contains(k, "*") {
				t.Fatalf("%q: accepted the extended parameter %q", v, k)
			}
		}
	})
}
