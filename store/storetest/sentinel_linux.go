package storetest

import "syscall"

// dieWithParent has the kernel kill a started redis-server when the test
// binary dies without running its cleanups (a panic, SIGKILL).
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
