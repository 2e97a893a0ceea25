package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem found in a spec, located at file:line:col (1-based;
// columns count characters, not bytes). Path is the field path inside the
// spec (e.g. "steps[2].timeout"), empty for file-level problems.
type Error struct {
	File string
	Line int
	Col  int
	Path string
	Msg  string
	// Cause is a typed error callers can branch on (e.g. *CycleError); nil
	// for plain problems.
	Cause error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Col)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Cause }

// ErrorList is every problem found in a spec, sorted by position. It is
// returned as a whole so users fix everything in one round trip.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(l))
	for _, e := range l {
		b.WriteString("\n")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes every problem to errors.Is/As (e.g. errors.As(err, &*CycleError)).
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list, else the list.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l ErrorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col),
			strings.Compare(a.Path, b.Path), strings.Compare(a.Msg, b.Msg))
	})
}

func (l ErrorList) dedupe() ErrorList {
	l.sort()
	return slices.CompactFunc(l, func(a, b *Error) bool {
		return a.Line == b.Line && a.Col == b.Col && a.Path == b.Path && a.Msg == b.Msg
	})
}

// MaxErrors caps the problems reported for one spec: past it a hostile or
// badly broken file costs no more work, and nobody reads error 101.
const MaxErrors = 100

// truncate caps l at MaxErrors, ending it with a note when it was cut (or
// when more problems were dropped while collecting).
func (l ErrorList) truncate(dropped bool) ErrorList {
	if len(l) > MaxErrors {
		l, dropped = l[:MaxErrors], true
	}
	if dropped && len(l) > 0 {
		last := l[len(l)-1]
		l = append(l, &Error{File: last.File, Line: last.Line, Col: last.Col, Msg: fmt.Sprintf("too many problems; only the first %d are shown", MaxErrors)})
	}
	return l
}

// CycleError reports a dependency cycle; Path starts and ends with the same
// step, e.g. [a b c a].
type CycleError struct{ Path []string }

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " -> ")
}

// LimitError reports input refused before or while parsing because it is
// too large (file size, alias expansion). It is not a syntax problem of the
// spec the user meant to write, so callers may want to say so.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }
