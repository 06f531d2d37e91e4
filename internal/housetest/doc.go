// Package housetest holds no code, only tests of the house rules that no
// single package can check: the layers of docs/architecture.md §1 (which
// package may import which) and that the import graph printed there is the
// one `go list` reports.
package housetest
