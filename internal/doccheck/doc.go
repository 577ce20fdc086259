// Package doccheck holds the tests that keep the top-level documents
// honest: README.md and BENCHMARKS.md within their sizes, and the
// README's Go program identical to the Example it is run as.
package doccheck
