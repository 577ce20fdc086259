//go:build !unix

package pgtest

import (
	"errors"
	"os/exec"
)

// runAs runs cmd as this process's user; switching users is only done on
// Unix, where root must hand the server to the postgres user.
func runAs(_ *exec.Cmd, as *osUser) error {
	if as != nil {
		return errors.New("pgtest: running the server as another user is only supported on Unix")
	}
	return nil
}
