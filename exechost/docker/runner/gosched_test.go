package runner

import "runtime"

func runtimeGosched() { runtime.Gosched() }
