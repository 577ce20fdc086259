//go:build unix

package pgtest

import (
	"os/exec"
	"syscall"
)

// runAs makes cmd run as the user as (nil: this process's user), and die
// with this process where the system can arrange it, so a test binary
// killed on a timeout leaves no server behind.
func runAs(cmd *exec.Cmd, as *osUser) error {
	attr := &syscall.SysProcAttr{}
	if as != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid), Groups: []uint32{}}
	}
	dieWithParent(attr)
	cmd.SysProcAttr = attr
	return nil
}
