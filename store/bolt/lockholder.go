package bolt

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// lockHolderPID finds the pid holding a flock on path by its inode in
// /proc/locks. It returns 0 when it cannot tell (no /proc, no match).
func lockHolderPID(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	own, ok := ownerOf(fi)
	if !ok {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	want := ":" + strconv.FormatUint(own.ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// "1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF"
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		if !strings.HasSuffix(fields[5], want) {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid != os.Getpid() {
			return pid
		}
	}
	return 0
}
