//go:build !linux

package main

import "errors"

func evict(path string) error { return errors.New("page-cache eviction needs Linux") }
