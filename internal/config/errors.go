package config

import (
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	// Path is the TOML key path of the offending value, with array indices:
	// `backends.openai-1.base_url`, `models."gpt 4".targets[2].weight`.
	// Keys that are not bare TOML keys are quoted. "" means the whole file.
	Path string
	// Msg says what is wrong and what was expected. It never contains a
	// secret value.
	Msg string
}

// Error is every problem found in a config file (Parse does not stop at the
// first one). Test for it with errors.As.
type Error struct {
	Problems []Problem
}

// Error lists the problems one per line as "path: msg".
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if p.Path != "" {
			b.WriteString(p.Path)
			b.WriteString(": ")
		}
		b.WriteString(p.Msg)
	}
	return b.String()
}

// SyntaxError is a TOML syntax error. It wraps the toml.ParseError, so
// errors.As(err, new(toml.ParseError)) also matches.
type SyntaxError struct {
	Line, Column int // 1-based position of the error
	Err          toml.ParseError
}

// Error reports the position and the parser's message. It does not quote the
// source line, which could hold a secret pasted by mistake (the parser's
// message may still quote the offending token).
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("toml syntax error at line %d, column %d: %s", e.Line, e.Column, e.Err.Message)
}

// Unwrap returns the toml.ParseError.
func (e *SyntaxError) Unwrap() error { return e.Err }
