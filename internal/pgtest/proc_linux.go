package pgtest

import "syscall"

// dieWithParent asks the kernel for SIGQUIT (the server's immediate
// shutdown) when the test process dies.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGQUIT }
