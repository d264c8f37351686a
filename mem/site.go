package mem

import "github.com/headroom-ml/headroom/internal/site"

// callerSite returns file:line of the first caller outside headroom's
// memory machinery (mem, runtime, train), for ledger reports: who asked for
// the memory.
func callerSite() string {
	return site.Caller(2, func(fn string) bool { return site.InPackages(fn, "mem", "runtime", "train") })
}
