package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// CronError is a problem in a cron expression; Offset is the byte offset of
// the offending field in the expression.
type CronError struct {
	Offset int
	Msg    string
}

func (e *CronError) Error() string { return e.Msg }

type cronField struct {
	name     string
	min, max int
	names    []string // index 0 = value min (month) or value 0 (dow)
	question bool     // '?' allowed
}

var (
	months  = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dows    = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
	fSecond = cronField{name: "second", min: 0, max: 59}
	fMinute = cronField{name: "minute", min: 0, max: 59}
	fHour   = cronField{name: "hour", min: 0, max: 23}
	fDom    = cronField{name: "day-of-month", min: 1, max: 31, question: true}
	fMonth  = cronField{name: "month", min: 1, max: 12, names: months}
	// Standard (5-field) day-of-week: 0-7, 0 and 7 are Sunday.
	fDowStd = cronField{name: "day-of-week", min: 0, max: 7, names: dows, question: true}
	// Quartz day-of-week: 1-7, 1 is Sunday.
	fDowQuartz = cronField{name: "day-of-week", min: 1, max: 7, names: dows, question: true}
	// Temporal accepts 2000-2100, Quartz 1970-2099: the intersection.
	fYear = cronField{name: "year", min: 2000, max: 2099}
)

var cronMacros = map[string]bool{"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true, "@daily": true, "@midnight": true, "@hourly": true}

// TranslateCron checks a cron expression and returns the same schedule in
// the syntax Temporal's ScheduleSpec.CronExpressions reads.
//
//   - 5 fields: standard cron (minute hour day-of-month month day-of-week,
//     day-of-week 0-7 with 0 and 7 = Sunday). Stays 5 fields.
//   - 6 or 7 fields: Quartz (second minute hour day-of-month month
//     day-of-week [year]), day-of-week 1-7 with 1 = Sunday. Temporal reads a
//     6-field string as year-last and uses 0 = Sunday, so the result is
//     always the 7-field form with day-of-week numbers shifted down by one.
//
// '?' means '*'. Quartz's L, W and # have no Temporal equivalent and are
// refused, as is restricting both day-of-month and day-of-week: classic
// cron ORs them, Temporal ANDs them, so either reading would surprise.
func TranslateCron(expr string) (string, error) {
	trimmed := strings.TrimSpace(expr)
	if cronMacros[trimmed] {
		return trimmed, nil
	}
	if strings.HasPrefix(trimmed, "@") {
		return "", &CronError{Offset: strings.Index(expr, "@"), Msg: fmt.Sprintf("unknown cron macro %q (use @yearly, @monthly, @weekly, @daily or @hourly)", trimmed)}
	}
	type tok struct {
		text string
		off  int
	}
	var toks []tok
	for i := 0; i < len(expr); {
		if expr[i] == ' ' || expr[i] == '\t' {
			i++
			continue
		}
		j := i
		for j < len(expr) && expr[j] != ' ' && expr[j] != '\t' {
			j++
		}
		toks = append(toks, tok{expr[i:j], i})
		i = j
	}
	var fields []cronField
	switch len(toks) {
	case 5:
		fields = []cronField{fMinute, fHour, fDom, fMonth, fDowStd}
	case 6:
		fields = []cronField{fSecond, fMinute, fHour, fDom, fMonth, fDowQuartz}
	case 7:
		fields = []cronField{fSecond, fMinute, fHour, fDom, fMonth, fDowQuartz, fYear}
	default:
		return "", &CronError{Msg: fmt.Sprintf("cron %q has %d fields; want 5 (standard) or 6-7 (Quartz: seconds first, optional year)", expr, len(toks))}
	}
	out := make([]string, len(toks))
	restricted := map[string]bool{}
	for i, f := range fields {
		t, err := parseCronField(toks[i].text, f, f.name == "day-of-week" && len(toks) > 5)
		if err != nil {
			return "", &CronError{Offset: toks[i].off, Msg: fmt.Sprintf("cron %s field %q: %s", f.name, toks[i].text, err)}
		}
		out[i] = t
		restricted[f.name] = t != "*"
	}
	if restricted["day-of-month"] && restricted["day-of-week"] {
		return "", &CronError{Offset: toks[len(toks)-3].off, Msg: "cron restricts both day-of-month and day-of-week; standard cron ORs them but Temporal ANDs them, so set one of them to ? or *"}
	}
	if len(toks) == 6 {
		out = append(out, "*")
	}
	return strings.Join(out, " "), nil
}

// parseCronField checks one field and returns its Temporal form. quartzDow
// shifts day-of-week numbers from Quartz (1 = SUN) to Temporal (0 = SUN).
func parseCronField(s string, f cronField, quartzDow bool) (string, error) {
	if s == "?" {
		if !f.question {
			return "", fmt.Errorf("'?' is only allowed in day-of-month and day-of-week")
		}
		return "*", nil
	}
	if s == "*" {
		return "*", nil
	}
	if i := strings.IndexAny(s, "LW#"); i >= 0 && !isNameAt(s, i, f) {
		return "", fmt.Errorf("Quartz special character %q is not supported by Temporal schedules", s[i:i+1])
	}
	var parts []string
	for part := range strings.SplitSeq(s, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		stepN := 1
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n < 1 || n > f.max {
				return "", fmt.Errorf("step %q must be a number from 1 to %d", step, f.max)
			}
			stepN = n
		}
		var lo, hi int
		explicitEnd := false
		switch {
		case rng == "*" || (rng == "?" && f.question):
			lo, hi = f.min, f.max
			if quartzDow || f.name == "day-of-week" {
				lo, hi = f.min, min(f.max, f.min+6)
			}
			explicitEnd = true
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = cronValue(a, f); err != nil {
				return "", err
			}
			if hi, err = cronValue(b, f); err != nil {
				return "", err
			}
			if hi < lo {
				return "", fmt.Errorf("range %s has its start after its end", rng)
			}
			explicitEnd = true
		default:
			v, err := cronValue(rng, f)
			if err != nil {
				return "", err
			}
			lo, hi = v, v
			if hasStep {
				hi = f.max // "a/n" runs from a to the field maximum
				explicitEnd = true
			}
		}
		if !quartzDow {
			parts = append(parts, part)
			continue
		}
		// Quartz 1..7 (SUN..SAT) -> Temporal 0..6.
		lo, hi = lo-1, hi-1
		switch {
		case !explicitEnd:
			parts = append(parts, strconv.Itoa(lo))
		case stepN == 1 && lo == hi:
			parts = append(parts, strconv.Itoa(lo))
		case stepN == 1:
			parts = append(parts, fmt.Sprintf("%d-%d", lo, hi))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d/%d", lo, hi, stepN))
		}
	}
	if !quartzDow {
		return strings.ReplaceAll(s, "?", "*"), nil
	}
	return strings.Join(parts, ","), nil
}

// isNameAt reports whether the letter at i belongs to a month or day name
// (e.g. the L in JUL, the W in WED), not a Quartz special character.
func isNameAt(s string, i int, f cronField) bool {
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '-' || r == '/' }) {
		start := strings.Index(s, p)
		if i >= start && i < start+len(p) {
			_, err := cronValue(p, f)
			return err == nil && !isDigits(p)
		}
	}
	return false
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// cronValue parses a number or a name. Names map to the field's own
// numbering: months 1-12; days SUN-SAT to 0-6 (standard) or 1-7 (Quartz).
func cronValue(s string, f cronField) (int, error) {
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || n < f.min || n > f.max {
			hint := ""
			if f.name == "day-of-week" && f.min == 1 {
				hint = " (Quartz numbering: 1=SUN ... 7=SAT; or use names SUN-SAT)"
			}
			return 0, fmt.Errorf("value %s is out of range %d-%d%s", s, f.min, f.max, hint)
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			if f.name == "month" {
				return i + 1, nil
			}
			return i + f.min, nil // SUN = 0 (standard) or 1 (Quartz)
		}
	}
	if f.names != nil {
		return 0, fmt.Errorf("%q is not a number from %d to %d or a name (%s-%s)", s, f.min, f.max, f.names[0], f.names[len(f.names)-1])
	}
	return 0, fmt.Errorf("%q is not a number from %d to %d", s, f.min, f.max)
}
