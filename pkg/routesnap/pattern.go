package routesnap

import "strings"

// Star is the wildcard of a pattern model name (docs/routing.md "Aliases
// and patterns").
const Star = "*"

// IsPattern reports whether a public model name is a pattern: a literal
// prefix, possibly empty, followed by one [Star] as its last character
// ("claude-*", "openai/*", "*"). A pattern matches every asked name that
// starts with its prefix and has at least one character after it; among
// the patterns that match a name, the one with the longest prefix wins,
// and an exact name always wins over every pattern.
func IsPattern(name string) bool { return strings.HasSuffix(name, Star) }

// Match reports whether the pattern matches the asked name, and returns
// the part of name that the star stands for. An exact (non-pattern) name
// matches only itself, with an empty star.
func Match(pattern, name string) (star string, ok bool) {
	prefix, isPattern := strings.CutSuffix(pattern, Star)
	if !isPattern {
		return "", pattern == name
	}
	if len(name) <= len(prefix) || !strings.HasPrefix(name, prefix) {
		return "", false
	}
	return name[len(prefix):], true
}

// Expand returns a target's provider model for an asked name whose
// pattern's star matched star: model with its [Star], if it has one,
// replaced by star. A target of a pattern writes "*" to send the part
// the star matched ("openai/*" → model "*": "openai/gpt-4o" is sent as
// "gpt-4o"), the pattern itself to send the whole asked name ("claude-*"
// → model "claude-*"), or a name without a star to send that one model
// whatever was asked.
func Expand(model, star string) string {
	before, after, ok := strings.Cut(model, Star)
	if !ok {
		return model
	}
	return before + star + after
}

// checkPatternName returns what is wrong with a public model name as a
// pattern, or "": the star may appear only once, as the last character.
func checkPatternName(name string) string {
	if i := strings.Index(name, Star); i >= 0 && i != len(name)-1 {
		return `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`
	}
	return ""
}

// checkTargetModel returns what is wrong with a target's provider model
// given whether its public model is a pattern, or "": a star only in a
// pattern's target, and at most one.
func checkTargetModel(model string, pattern bool) string {
	switch n := strings.Count(model, Star); {
	case n == 0:
		return ""
	case !pattern:
		return `"*" stands for what a pattern's star matched, and this model's name is no pattern (a name that ends in "*")`
	case n > 1:
		return `"*" may appear only once (it stands for what the pattern's star matched)`
	}
	return ""
}
