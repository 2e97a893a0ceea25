// Package tartest builds well-formed and hostile tar streams for tests of
// the workspace filter and of checkpoint restore. Test support only.
package tartest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Entry is one entry of a well-formed archive.
type Entry struct {
	Name string
	Type byte
	Body string
	Link string
}

// Build writes entries with archive/tar (GNU format, as the host stores).
func Build(entries ...Entry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Link, Mode: 0o644,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatGNU}
		if e.Type == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				panic(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Good is a small well-formed workspace archive.
func Good() []byte {
	return Build(Entry{Name: "a.txt", Type: tar.TypeReg, Body: "hello"},
		Entry{Name: "d/", Type: tar.TypeDir},
		Entry{Name: "d/b.txt", Type: tar.TypeReg, Body: "world"})
}

// Header builds one raw ustar header block with a correct checksum, for
// fields archive/tar refuses to write. size is written as given (octal).
func Header(name string, typ byte, size string, link string) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0001750\x00")
	copy(b[116:124], "0001750\x00")
	copy(b[124:136], size)
	copy(b[136:148], "14000000000\x00")
	b[156] = typ
	copy(b[157:257], link)
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	Checksum(b)
	return b
}

// Checksum fixes the checksum field of header block b.
func Checksum(b []byte) {
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:512] {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// pad rounds a body up to whole blocks.
func pad(body []byte) []byte {
	n := (512 - len(body)%512) % 512
	return append(body, make([]byte, n)...)
}

func octal(n int) string { return fmt.Sprintf("%011o\x00", n) }

func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		s := fmt.Sprint(n) + rec
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var marker = make([]byte, 1024)

// Malformed are named streams that are not one well-formed, safe archive.
// Every one must be refused as a corrupt checkpoint.
func Malformed() map[string][]byte {
	good := Good()
	flipped := bytes.Clone(good)
	flipped[3] ^= 0x20 // in the first name; checksum not fixed

	negative := Header("neg.txt", tar.TypeReg, "", "")
	negative[124] = 0xff // base-256, negative
	for i := 125; i < 136; i++ {
		negative[i] = 0xff
	}
	Checksum(negative)

	sparseBody := paxRecord("GNU.sparse.numblocks", "1") + paxRecord("GNU.sparse.map", "0,5") + paxRecord("GNU.sparse.size", "1073741824") +
		paxRecord("GNU.sparse.name", "sparse.bin")
	gnuSparse := Header("sparse.bin", tar.TypeGNUSparse, octal(0), "")
	copy(gnuSparse[257:265], "ustar  \x00") // GNU magic: archive/tar parses the sparse map
	copy(gnuSparse[483:495], octal(1<<30))  // real size: 1 GiB of holes
	Checksum(gnuSparse)
	bigPAX := paxRecord("comment", strings.Repeat("x", 2<<20))
	garbage := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.UintN(256))
	}
	garbage[0] = 'G' // never all zeros

	return map[string][]byte{
		"bad checksum":              flipped,
		"truncated header":          good[:300],
		"truncated content":         good[:512+3],
		"no end-of-archive marker":  good[:len(good)-1024],
		"half a marker":             good[:len(good)-512],
		"empty stream":              {},
		"trailing garbage 1 MiB":    concat(good, garbage),
		"zeros past the record":     concat(good, make([]byte, 10240)),
		"second archive appended":   concat(good, Good()),
		"zero block then data":      concat(good[:len(good)-1024], make([]byte, 512), Header("x", tar.TypeReg, octal(0), ""), marker),
		"negative size":             concat(negative, marker),
		"size not a number":         concat(Header("n.txt", tar.TypeReg, "zzzzzzzzzz\x00", ""), marker),
		"gnu sparse":                concat(gnuSparse, marker),
		"pax sparse":                concat(Header("PaxHeaders/s", tar.TypeXHeader, octal(len(sparseBody)), ""), pad([]byte(sparseBody)), Header("s", tar.TypeReg, octal(5), ""), pad([]byte("hello")), marker),
		"oversized pax header":      concat(Header("PaxHeaders/big", tar.TypeXHeader, octal(len(bigPAX)), ""), pad([]byte(bigPAX)), Header("b", tar.TypeReg, octal(0), ""), marker),
		"duplicate entry":           Build(Entry{Name: "a.txt", Type: tar.TypeReg, Body: "1"}, Entry{Name: "./a.txt", Type: tar.TypeReg, Body: "2"}),
		"non-UTF-8 name":            Build(Entry{Name: "bad-\xff.txt", Type: tar.TypeReg, Body: "x"}),
		"dot-dot name":              concat(Header("a/../../x", tar.TypeReg, octal(0), ""), marker),
		"absolute name":             concat(Header("/etc/passwd", tar.TypeReg, octal(0), ""), marker),
		"hard link":                 Build(Entry{Name: "a.txt", Type: tar.TypeReg, Body: "1"}, Entry{Name: "h", Type: tar.TypeLink, Link: "a.txt"}),
		"device":                    concat(Header("dev", tar.TypeChar, octal(0), ""), marker),
		"symlink chain to the root": Build(Entry{Name: "b", Type: tar.TypeSymlink, Link: "."}, Entry{Name: "d", Type: tar.TypeSymlink, Link: "b/.."}),
		"absolute symlink":          Build(Entry{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}),
		"write through a symlink":   Build(Entry{Name: "l", Type: tar.TypeSymlink, Link: "d"}, Entry{Name: "l/x", Type: tar.TypeReg, Body: "x"}),
		"unknown type":              concat(Header("u", 'Z', octal(0), ""), marker),
	}
}
