// Command clidoc writes docs/cli.md from the idemrun command's own help
// and the source of the types its --json output encodes, so the
// reference cannot drift from the code. Run it from the module's root
// after changing a command, a flag or a JSON field:
//
//	make cli-doc    # or: go run ./internal/clidoc
//
// A test fails while docs/cli.md differs from what it would write.
package main
