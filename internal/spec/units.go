package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// sizeUnits follows Kubernetes quantities: decimal k/K, M, G, T, P (also
// written KB, MB, ...), binary Ki, Mi, Gi, Ti, Pi (also KiB, MiB, ...).
// Lower-case m and g alone are refused: Docker reads "512m" as MiB while
// Kubernetes reads "m" as milli, so either reading would surprise someone.
var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"k": 1e3, "K": 1e3, "KB": 1e3, "kB": 1e3,
	"M": 1e6, "MB": 1e6,
	"G": 1e9, "GB": 1e9,
	"T": 1e12, "TB": 1e12,
	"P": 1e15, "PB": 1e15,
	"Ki": 1 << 10, "KiB": 1 << 10,
	"Mi": 1 << 20, "MiB": 1 << 20,
	"Gi": 1 << 30, "GiB": 1 << 30,
	"Ti": 1 << 40, "TiB": 1 << 40,
	"Pi": 1 << 50, "PiB": 1 << 50,
}

// ParseSize parses a byte size: "1048576", "512Mi", "1.5Gi", "1G", "100KB".
// Fractions are rounded up to a whole byte.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, unit := splitNumber(s)
	if num == "" {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit like 512Mi, 4Gi or 1G", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		switch unit {
		case "m", "mi", "mb":
			return 0, fmt.Errorf("invalid size %q: unit %q is ambiguous, use Mi (2^20) or M (10^6)", s, unit)
		case "g", "gi", "gb":
			return 0, fmt.Errorf("invalid size %q: unit %q is ambiguous, use Gi (2^30) or G (10^9)", s, unit)
		}
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use Ki, Mi, Gi, Ti or K, M, G, T)", s, unit)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || r.Sign() < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	// round up to a whole byte
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if new(big.Rat).SetInt(q).Cmp(r) < 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return q.Int64(), nil
}

// splitNumber splits "1.5Gi" into "1.5" and "Gi". The number part is
// digits with at most one dot; an empty number means s did not start with one.
func splitNumber(s string) (string, string) {
	i, dots, digits := 0, 0, 0
	for i < len(s) {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && dots == 0 {
			dots++
		} else {
			break
		}
		i++
	}
	if digits == 0 {
		return "", s
	}
	return s[:i], s[i:]
}

// ParseCPU parses CPU cores to nano-CPUs (Docker's NanoCpus): "1.5", "2",
// "500m" (milli-cores, as in Kubernetes).
func ParseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, unit := splitNumber(s)
	var scale int64
	switch unit {
	case "":
		scale = 1e9
	case "m":
		scale = 1e6
	default:
		return 0, fmt.Errorf("invalid cpu %q: want cores like \"1.5\", \"2\" or milli-cores like \"500m\"", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid cpu %q: want cores like \"1.5\", \"2\" or milli-cores like \"500m\"", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid cpu %q: more precision than a nano-CPU", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("invalid cpu %q: too large", s)
	}
	return r.Num().Int64(), nil
}

// ParseGPU parses a GPU request: a whole count ("0", "1", "2") or "all"
// (returned as -1). Docker assigns whole devices, so fractions are refused.
func ParseGPU(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "all" {
		return -1, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid gpu %q: must not be negative", s)
		}
		return n, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("fractional gpu %q is not supported: Docker assigns whole devices, use a whole number or \"all\"", s)
	}
	return 0, fmt.Errorf("invalid gpu %q: want a whole number like \"1\" or \"all\"", s)
}

var errBadDuration = errors.New("want a Go duration like 30s, 1h30m or 2d (units ns, us, ms, s, m, h, d)")

// ParseDuration parses Go duration syntax plus a "d" unit (24h, ignoring
// DST), e.g. "30s", "1h30m", "2d", "1d12h". A leading sign is allowed here;
// validation decides whether zero or negative values make sense.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "d") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %w", s, errBadDuration)
		}
		return d, nil
	}
	neg := false
	rest := s
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg = rest[0] == '-'
		rest = rest[1:]
	}
	var total float64
	for rest != "" {
		num, after := splitNumber(rest)
		if num == "" {
			return 0, fmt.Errorf("invalid duration %q: %w", s, errBadDuration)
		}
		unit := after
		for i, c := range after {
			if c == '.' || (c >= '0' && c <= '9') {
				unit = after[:i]
				break
			}
		}
		rest = after[len(unit):]
		if unit == "d" {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("invalid duration %q: %w", s, errBadDuration)
			}
			total += f * float64(24*time.Hour)
			continue
		}
		d, err := time.ParseDuration(num + unit)
		if err != nil || unit == "" {
			return 0, fmt.Errorf("invalid duration %q: %w", s, errBadDuration)
		}
		total += float64(d)
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("invalid duration %q: too large", s)
	}
	if neg {
		total = -total
	}
	return time.Duration(total), nil
}
