package jsonedit

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestElements: every element exactly as written with its offset, and
// the same verdict on malformed arrays as a full scan.
func TestElements(t *testing.T) {
	tests := []struct {
		doc     string
		want    []string
		wantErr bool
		notArr  bool
	}{
		{doc: `[]`},
		{doc: " [ 1 , {\"a\":[2]} ,\"x\", null ] \n", want: []string{`1`, `{"a":[2]}`, `"x"`, `null`}},
		{doc: `[1,]`, want: []string{`1`}, wantErr: true},
		{doc: `[1 2]`, want: []string{`1`}, wantErr: true},
		{doc: `[1] x`, want: []string{`1`}, wantErr: true},
		{doc: `[`, wantErr: true},
		{doc: `{"a":1}`, wantErr: true, notArr: true},
		{doc: ``, wantErr: true},
	}
	for _, tt := range tests {
		it, err := Elements([]byte(tt.doc))
		var got []string
		for err == nil {
			v, at, ok, nerr := it.Next()
			if err = nerr; !ok {
				break
			}
			if string(v) != tt.doc[at:at+len(v)] {
				t.Errorf("%q: element %q not at %d", tt.doc, v, at)
			}
			got = append(got, string(v))
		}
		if diff := cmp.Diff(got, tt.want); diff != "" {
			t.Errorf("%q: elements (-got +want):\n%s", tt.doc, diff)
		}
		if (err != nil) != tt.wantErr || errors.Is(err, ErrNotArray) != tt.notArr {
			t.Errorf("%q: err %v, want error %v (not an array %v)", tt.doc, err, tt.wantErr, tt.notArr)
		}
	}
}
