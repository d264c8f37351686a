// Package site names source locations for reports: the file:line of the
// code that built an op, charged memory or allocated in the Go heap, with
// paths shortened to the module's root ("nn/layers.go:74").
package site

import (
	"runtime"
	"strconv"
	"strings"
)

// Module is headroom's module path, the prefix of its functions' names.
const Module = "github.com/headroom-ml/headroom/"

// root is the directory that holds this module's source, found from this
// file's own path.
var root = func() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	return strings.TrimSuffix(file, "internal/site/site.go")
}()

// Trim returns file relative to the module's root when it lies inside it,
// else the last two elements of the path.
func Trim(file string) string {
	if root != "" && strings.HasPrefix(file, root) {
		return file[len(root):]
	}
	if i := strings.LastIndex(file, "/"); i >= 0 {
		if j := strings.LastIndex(file[:i], "/"); j >= 0 {
			return file[j+1:]
		}
	}
	return file
}

// InPackages reports whether the function named fn is in one of headroom's
// packages pkgs (given as "mem", "internal/exec", ...).
func InPackages(fn string, pkgs ...string) bool {
	for _, p := range pkgs {
		if strings.HasPrefix(fn, Module+p+".") {
			return true
		}
	}
	return false
}

// Caller returns "file:line" of the first frame above skip that skip
// reports false for, or "".
func Caller(skip int, machinery func(fn string) bool) string {
	var pcs [32]uintptr
	n := runtime.Callers(skip+2, pcs[:])
	return First(pcs[:n], machinery)
}

// First returns "file:line" of the first frame of the stack pcs that
// machinery reports false for, or "".
func First(pcs []uintptr, machinery func(fn string) bool) string {
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !machinery(f.Function) {
			return Trim(f.File) + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return ""
		}
	}
}
