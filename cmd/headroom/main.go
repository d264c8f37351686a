// Command headroom trains neural networks with memory you can trust. See
// the README, or run 'headroom help'.
package main

import (
	"os"

	"github.com/headroom-ml/headroom/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
