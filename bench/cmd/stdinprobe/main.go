// Command stdinprobe is a test-only program for the exec round-trip trace
// (bench/exectrace_test.go): it reads stdin to its end, as a tool reads its
// input, and prints when it started, when the first bytes and the end of
// stdin arrived and how many bytes it read, as one JSON object of Unix
// nanoseconds (the sandbox shares the host's clock). Never part of an image.
package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"
)

type report struct {
	Start int64 `json:"start"`
	First int64 `json:"first"`
	EOF   int64 `json:"eof"`
	Bytes int   `json:"bytes"`
}

func main() {
	r := report{Start: time.Now().UnixNano()}
	buf := make([]byte, 64<<10)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 && r.First == 0 {
			r.First = time.Now().UnixNano()
		}
		r.Bytes += n
		if errors.Is(err, io.EOF) {
			r.EOF = time.Now().UnixNano()
			break
		}
		if err != nil {
			os.Exit(3)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(4)
	}
}
