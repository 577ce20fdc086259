package bolt_test

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// cliWords are the CLI's commands and flags, and the backquotes its
// commands are quoted in.
var cliWords = regexp.MustCompile("`|--[a-z]|idemrun (backup|bench|cancel|check|compact|demo|enqueue|list|resolve|retry|run|show|stats|watch)\\b")

// noCLIWords fails when msg names a command or flag of the CLI: the store
// speaks its own terms (Check, Backup, Open), and the CLI, which knows its
// commands and flags, adds them where it prints the error.
func noCLIWords(t *testing.T, what, msg string) {
	t.Helper()
	if w := cliWords.FindString(msg); w != "" {
		t.Errorf("%s: message %q names the CLI (%q); want the store's own terms", what, msg, w)
	}
}

// wantDamaged checks that err is a FileError, FileDamaged, about path,
// whose message says want and names no CLI command.
func wantDamaged(t *testing.T, what string, err error, path, want string) {
	t.Helper()
	fe, ok := errors.AsType[*bolt.FileError](err)
	if !ok || fe.Problem != bolt.FileDamaged || fe.Path != path {
		t.Errorf("%s: %v (FileError %+v); want a FileError, damaged, about %s", what, err, fe, path)
		return
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("%s: %q; want it to name %s and say %q", what, err, path, want)
	}
	noCLIWords(t, what, err.Error())
}

// Damaged job records found by a read, and by Compact, are a FileError
// (FileDamaged) about the file, whose message points to Check.
func TestDamagedRecordsAreFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	db := openAt(t, good, nil)
	var ids []string
	for i := range 20 {
		j := storetest.NewJob("damaged-"+string(rune('a'+i)), storetest.T0())
		if _, err := db.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := storetest.DamagedCopies(t, good, dir, "damaged-")["records-broken"]

	_, err := bolt.Compact(path, nil)
	wantDamaged(t, "Compact of a file with damaged records", err, path, "the database itself has problems")
	if err != nil && !strings.Contains(err.Error(), "Check reports the damage") {
		t.Errorf("Compact of a file with damaged records: %q; want it to say Check reports the damage", err)
	}

	db = openAt(t, path, &bolt.Options{ReadOnly: true})
	defer db.Close()
	damaged := 0
	for _, id := range ids {
		_, err := db.Get(id)
		if !errors.Is(err, bolt.ErrCorruptRecord) {
			continue
		}
		damaged++
		wantDamaged(t, "Get of a damaged record", err, path, "Check reports the damage")
	}
	if damaged == 0 {
		t.Fatal("no Get of the damaged copy returned ErrCorruptRecord")
	}
}
