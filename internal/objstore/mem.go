package objstore

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Store for unit tests. Fail, when set, is returned by
// every operation (to simulate an outage).
type Mem struct {
	mu   sync.Mutex
	objs map[string]memObject
	Fail error
}

type memObject struct {
	data []byte
	mod  time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty Mem.
func NewMem() *Mem { return &Mem{objs: map[string]memObject{}} }

func (m *Mem) fail(op, key string) error {
	if m.Fail == nil {
		return nil
	}
	return &UnavailableError{Store: m.String(), Op: op, Key: key, Reason: m.Fail.Error(), Err: m.Fail}
}

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("put", key); err != nil {
		return Info{}, err
	}
	if _, ok := m.objs[key]; ok && opts.IfAbsent {
		return Info{}, ErrExists
	}
	o := memObject{data: data, mod: time.Now()}
	m.objs[key] = o
	return Info{Key: key, Size: int64(len(data)), ModTime: o.mod}, nil
}

// Get implements Store.
func (m *Mem) Get(_ context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("get", key); err != nil {
		return nil, err
	}
	o, ok := m.objs[key]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

// Stat implements Store.
func (m *Mem) Stat(_ context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("stat", key); err != nil {
		return Info{}, err
	}
	o, ok := m.objs[key]
	if !ok {
		return Info{}, ErrNotFound
	}
	return Info{Key: key, Size: int64(len(o.data)), ModTime: o.mod}, nil
}

// List implements Store.
func (m *Mem) List(_ context.Context, prefix string) ([]Info, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("list", prefix); err != nil {
		return nil, err
	}
	var out []Info
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Info{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
		}
	}
	sortInfos(out)
	return out, nil
}

// Delete implements Store.
func (m *Mem) Delete(_ context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail("delete", key); err != nil {
		return err
	}
	delete(m.objs, key)
	return nil
}

// DeletePrefix implements Store.
func (m *Mem) DeletePrefix(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkSegmentPrefix(prefix); err != nil {
		return nil, err
	}
	return deleteListed(ctx, m, prefix)
}

// String implements Store.
func (m *Mem) String() string { return "mem" }
