package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/cli.md is what the generator writes from the code as it is; the
// failure names the command that brings it up to date.
func TestRenderMatchesDocsCLI(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := renderModule(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, outPath))
	if err != nil {
		t.Fatalf("%v; run `make cli-doc` (go run ./internal/clidoc) at the module's root", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		at := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("%s is stale: run `make cli-doc` (go run ./internal/clidoc) at the module's root and commit it\nfirst difference, line %d:\n  file:      %s\n  generated: %s", outPath, i+1, at(gl), at(wl))
	}
}

// A command list is read from the lines after the usage line, up to the
// first line that is not one; a subcommand help's list alike.
func TestCommandList(t *testing.T) {
	help := "usage: idemrun host SUBCOMMAND [flags]\n\n  list    show hosts\n  set     set a host's rate\n\nHOST is the URL's host.\n  not    a command\n"
	got := commandList(help)
	want := [][2]string{{"list", "show hosts"}, {"set", "set a host's rate"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("commandList = %q, want %q", got, want)
	}
}

// Every JSON type the reference lists is found, with its fields' tag
// names; a field tagged "-" is left out.
func TestStructFields(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, jt := range jsonTypes {
		fs, err := structFields(filepath.Join(root, jt.dir), jt.name)
		if err != nil || len(fs) == 0 {
			t.Errorf("%s.%s: %d fields, err %v", jt.dir, jt.name, len(fs), err)
		}
	}
	fs, err := structFields(filepath.Join(root, "store", "bolt"), "CompactResult")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fs {
		names = append(names, f.name)
	}
	if got := strings.Join(names, ","); got != "bytes_before,bytes_after,free_pages_before,jobs,took_ms" {
		t.Errorf("CompactResult fields = %s, want its JSON names without the one tagged -", got)
	}
}
