//go:build !linux

package storetest

import "syscall"

// dieWithParent is Linux's only: elsewhere the cleanups alone stop the
// started processes.
func dieWithParent() *syscall.SysProcAttr { return nil }
