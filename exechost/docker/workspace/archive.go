package workspace

import (
	"errors"
	"fmt"
	"io"
)

// ErrMalformedArchive matches every stream that is not one well-formed tar
// archive: a header archive/tar cannot parse (bad checksum, truncated,
// negative or oversized fields, PAX headers over archive/tar's 1 MiB bound),
// a missing end-of-archive marker, or anything after it but the padding
// below. A checkpoint layer that is malformed is a corrupt checkpoint.
var ErrMalformedArchive = errors.New("malformed tar archive")

const (
	blockSize = 512
	// recordSize is tar's default record (20 blocks): writers such as GNU
	// tar and git archive pad the archive with NUL bytes to a multiple of
	// it after the two end-of-archive blocks.
	recordSize = 20 * blockSize
	// markerSize is the end-of-archive marker: two NUL blocks.
	markerSize = 2 * blockSize
)

// archiveSource wraps one raw tar stream. It counts what archive/tar reads
// (archive/tar reads exactly the blocks it parses, never ahead) and keeps
// the first error of the source itself, so a failing source (a store
// outage, a checkpoint failing its digest, a canceled context, the stream
// bound) is reported as itself and not as a malformed archive.
type archiveSource struct {
	r   io.Reader
	n   int64
	err error
}

func (s *archiveSource) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// fail classifies an error from archive/tar.
func (s *archiveSource) fail(err error) error {
	if s.err != nil {
		return s.err
	}
	return fmt.Errorf("%w: %w", ErrMalformedArchive, err)
}

// finish is called once archive/tar reported the end of the archive; at is
// where the source stood when the last Next began (just after the last
// entry's content). The rule, exactly: the previous entry's padding to a
// block boundary, then the two NUL blocks, then at most NUL bytes up to the
// end of the record (10240 bytes) that holds the marker's last byte, then
// the end of the stream. Everything is read to the end, so a verifying
// source checks every byte of the layer.
func (s *archiveSource) finish(at int64) error {
	end := at + (blockSize-at%blockSize)%blockSize + markerSize
	if s.n != end {
		return fmt.Errorf("%w: no end-of-archive marker (stream ends at byte %d)", ErrMalformedArchive, s.n)
	}
	pad := (recordSize - end%recordSize) % recordSize
	var buf [blockSize]byte
	for {
		k, err := s.Read(buf[:])
		for _, b := range buf[:k] {
			if b != 0 {
				return fmt.Errorf("%w: data after the end-of-archive marker", ErrMalformedArchive)
			}
		}
		if s.n-end > pad {
			return fmt.Errorf("%w: more than %d bytes of padding after the end-of-archive marker", ErrMalformedArchive, pad)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
