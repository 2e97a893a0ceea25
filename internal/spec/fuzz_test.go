package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes through parse -> validate -> compile.
// Nothing may panic; every problem must carry a position; a successful
// Plan must survive the JSON trip through Temporal history.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../../specs/*.yaml", "testdata/invalid/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("name: t\nversion: \"1.0.0\"\nsteps: [{id: a, tool: 'x:1', resources: &r {cpu: 1}}, {id: b, approval: {prompt: p}, depends_on: [a]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load("f.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatal("plan returned with an error")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is not an ErrorList: %v", err)
			}
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || e.Msg == "" {
					t.Fatalf("error without position or message: %#v", e)
				}
			}
			return
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("plan does not marshal: %v", err)
		}
		var back Plan
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("plan does not unmarshal: %v", err)
		}
	})
}
