// Package layout holds no code: its test checks the import rules that keep
// headroom's seams (README.md, "How it works"), by parsing every non-test Go
// file of the module, whatever its build tags.
package layout
