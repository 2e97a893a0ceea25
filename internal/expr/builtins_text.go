package expr

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

func strFn(f func(string) string) func(*evaluator, int, []any) (any, error) {
	return func(ev *evaluator, pos int, args []any) (any, error) {
		s, err := asString(pos, "argument", args[0])
		if err != nil {
			return nil, err
		}
		if err := ev.chargeBytes(pos, len(s)); err != nil {
			return nil, err
		}
		// Case mapping can grow a string (e.g. some runes widen in UTF-8),
		// so bound the input first and check the result too.
		if len(s) > MaxResultBytes {
			return nil, limitEvalErr(pos, "result larger than %d bytes", MaxResultBytes)
		}
		return ev.checkStr(pos, f(s))
	}
}

func fnNow(ev *evaluator, pos int, _ []any) (any, error) {
	t, err := ev.now(pos)
	if err != nil {
		return nil, err
	}
	return t.UTC().Format(time.RFC3339), nil
}

// fnDate formats an RFC3339 timestamp (or a number of Unix seconds) with a
// Go layout; without a layout it normalises to RFC3339. The time keeps its
// own offset (now is UTC); there is no time-zone argument because zone
// rules come from the host and would make workflow replay depend on it.
func fnDate(ev *evaluator, pos int, args []any) (any, error) {
	var t time.Time
	switch x := args[0].(type) {
	case string:
		var err error
		t, err = time.Parse(time.RFC3339, x)
		if err != nil {
			t, err = time.Parse(time.DateOnly, x)
		}
		if err != nil {
			return nil, evalErrf(pos, "date: %q is not an RFC3339 timestamp", truncate(x, 64))
		}
	case float64:
		if math.IsNaN(x) || math.Abs(x) > 1e13 {
			return nil, evalErrf(pos, "date: %v is out of range", x)
		}
		sec, frac := math.Modf(x)
		t = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	case nil:
		return nil, nil
	default:
		return nil, evalErrf(pos, "date needs a timestamp string, got %s", typeName(args[0]))
	}
	layout := time.RFC3339
	if len(args) > 1 {
		l, ok := args[1].(string)
		if !ok {
			return nil, evalErrf(pos, "date layout must be a string, got %s", typeName(args[1]))
		}
		layout = l
	}
	if err := ev.chargeBytes(pos, len(layout)*16); err != nil {
		return nil, err
	}
	if len(layout) > MaxResultBytes/16 {
		return nil, limitEvalErr(pos, "date layout too long")
	}
	return ev.checkStr(pos, t.Format(layout))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func fnTrim(ev *evaluator, pos int, args []any) (any, error) {
	s, err := asString(pos, "trim", args[0])
	if err != nil {
		return nil, err
	}
	if err := ev.chargeBytes(pos, len(s)); err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return strings.TrimSpace(s), nil
	}
	cut, err := asString(pos, "trim characters", args[1])
	if err != nil {
		return nil, err
	}
	return strings.Trim(s, cut), nil
}

func fnReplace(ev *evaluator, pos int, args []any) (any, error) {
	s, err := asString(pos, "replace", args[0])
	if err != nil {
		return nil, err
	}
	old, err := asString(pos, "replace (old)", args[1])
	if err != nil {
		return nil, err
	}
	repl, err := asString(pos, "replace (new)", args[2])
	if err != nil {
		return nil, err
	}
	if err := ev.chargeBytes(pos, len(s)); err != nil {
		return nil, err
	}
	// Compute the result size before building it, so a doubling chain
	// fails fast instead of allocating.
	var n int
	if old == "" {
		n = utf8.RuneCountInString(s) + 1
	} else {
		n = strings.Count(s, old)
	}
	if size := len(s) + n*(len(repl)-len(old)); size > MaxResultBytes {
		return nil, limitEvalErr(pos, "result larger than %d bytes", MaxResultBytes)
	}
	return strings.ReplaceAll(s, old, repl), nil
}

func fnSplit(ev *evaluator, pos int, args []any) (any, error) {
	s, err := asString(pos, "split", args[0])
	if err != nil {
		return nil, err
	}
	if err := ev.chargeBytes(pos, len(s)); err != nil {
		return nil, err
	}
	var parts []string
	if len(args) == 1 {
		parts = strings.Fields(s)
	} else {
		sep, err := asString(pos, "split separator", args[1])
		if err != nil {
			return nil, err
		}
		var n int
		if sep == "" {
			n = utf8.RuneCountInString(s)
		} else {
			n = strings.Count(s, sep) + 1
		}
		if n > MaxCollectionLen {
			return nil, limitEvalErr(pos, "list longer than %d elements", MaxCollectionLen)
		}
		if s == "" {
			return []any{}, nil
		}
		parts = strings.Split(s, sep)
	}
	if len(parts) > MaxCollectionLen {
		return nil, limitEvalErr(pos, "list longer than %d elements", MaxCollectionLen)
	}
	if err := ev.charge(pos, len(parts)); err != nil {
		return nil, err
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}
