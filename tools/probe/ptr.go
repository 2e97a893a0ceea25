package main

import "unsafe"

// uintptrOf passes a Go buffer to a raw syscall. The buffers outlive the
// call (they are package-level or escape to the heap via the caller).
func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }
