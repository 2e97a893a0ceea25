package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInvalidSpecs loads every file in testdata/invalid and checks the
// errors against its "# want: LINE:COL: TEXT" header lines: same count,
// same positions in order, and TEXT matching the error's "path: msg".
// TEXT may contain "..." to skip over parts of messages produced by the
// expression package, whose exact wording it owns.
func TestInvalidSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 30)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			var wants []string
			for line := range bytes.Lines(data) {
				if w, ok := bytes.CutPrefix(line, []byte("# want: ")); ok {
					wants = append(wants, strings.TrimSpace(string(w)))
				}
			}
			require.NotEmpty(t, wants, "no # want: lines")

			plan, err := Load(f, data)
			require.Nil(t, plan)
			var list ErrorList
			require.ErrorAs(t, err, &list)
			var got []string
			for _, e := range list {
				require.Equal(t, f, e.File)
				got = append(got, strings.TrimPrefix(e.Error(), f+":"))
			}
			require.Len(t, got, len(wants), "errors:\n%s", strings.Join(got, "\n"))
			for i, w := range wants {
				require.True(t, matchWant(w, got[i]), "want %q\n got %q", w, got[i])
			}
		})
	}
}

func matchWant(want, got string) bool {
	pieces := strings.Split(want, "...")
	if !strings.HasPrefix(got, pieces[0]) {
		return false
	}
	rest := got[len(pieces[0]):]
	for _, p := range pieces[1:] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(pieces) > 1 || rest == ""
}

func TestOversizedSpec(t *testing.T) {
	data := append([]byte("name: t\nversion: \"1.0.0\"\ndescription: \""), bytes.Repeat([]byte("x"), MaxSpecSize)...)
	data = append(data, "\"\nsteps: [{id: a, tool: 'x:1'}]\n"...)
	_, err := Load("big.yaml", data)
	var list ErrorList
	require.ErrorAs(t, err, &list)
	require.Len(t, list, 1)
	require.Equal(t, fmt.Sprintf("big.yaml:1:1: file is %d bytes, over the 1048576 byte (1 MiB) limit", len(data)), list[0].Error())
	var le *LimitError
	require.ErrorAs(t, err, &le)

	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err = LoadFile(path)
	require.ErrorAs(t, err, &le)
}

func TestCycleErrorIsTyped(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid/cycle.yaml")
	require.NoError(t, err)
	_, err = Load("cycle.yaml", data)
	var ce *CycleError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"a", "c", "b", "a"}, ce.Path)
}

func TestAliasBombFailsFast(t *testing.T) {
	// A deeper bomb than the testdata one: 9^12 expanded nodes. Nothing is
	// expanded eagerly, so this returns after the node budget.
	var b strings.Builder
	b.WriteString("name: t\nversion: \"1.0.0\"\nsteps:\n  - id: a\n    tool: x:1\n    inputs:\n      l0: &l0 [x,x,x,x,x,x,x,x,x]\n")
	for i := 1; i <= 12; i++ {
		b.WriteString("      l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [")
		for j := range 9 {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("*l" + strconv.Itoa(i-1))
		}
		b.WriteString("]\n")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load("bomb.yaml", []byte(b.String()))
	runtime.ReadMemStats(&after)
	// 9^12 nodes would need terabytes; the budget keeps it to a few MiB.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20))
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.True(t, errors.As(err, new(ErrorList)))
}
