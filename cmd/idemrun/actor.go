package main

import (
	"os"
	"os/user"
	"strconv"
)

// actor names who a manual action (cancel, retry, resolve) records:
// $IDEMRUN_ACTOR, $USER or $LOGNAME, else the name of this process's
// user, else its uid; a cron job or a container often sets none of the
// variables, and "unknown" tells a reader of the history nothing.
func (m *Main) actor() string {
	for _, k := range []string{"IDEMRUN_ACTOR", "USER", "LOGNAME"} {
		if v := m.Getenv(k); v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if uid := os.Getuid(); uid >= 0 {
		return "uid " + strconv.Itoa(uid)
	}
	return "unknown"
}
