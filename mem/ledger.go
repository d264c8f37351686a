package mem

import (
	"context"
	"sort"
	"sync"
)

// Ledger accounts for every byte a process holds: each charge has a category
// and an owner (a layer, op or pipeline stage name). A Ledger may have a
// budget, a hard limit on its live bytes: a charge that would pass it fails
// with *OOMError, or, through ChargeWait, waits until releases make room
// (backpressure). A sub-ledger (Sub) has its own budget and forwards every
// charge to its parent, so one root ledger sees all bytes.
//
// A Ledger is safe for concurrent use. Charging an owner already seen does
// not allocate.
type Ledger struct {
	name   string
	parent *Ledger

	mu     sync.Mutex
	cond   *sync.Cond
	budget int64 // <= 0: unlimited
	live   int64
	peak   int64
	byCat  [NumCategories]int64
	peakBy [NumCategories]int64 // category totals at the moment of peak
	owners map[ownerKey]*ownerEntry
	// largestFree, when set, reports the largest free block of the allocator
	// that charges this ledger, for OOM reports.
	largestFree func() int64
}

type ownerKey struct {
	cat   Category
	owner string
}

type ownerEntry struct {
	live, peak int64
	count      int
	site       string
}

// Entry is one owner's live bytes in one category.
type Entry struct {
	Owner    string
	Category Category
	Bytes    int64
	Count    int    // live charges
	Site     string // file:line of the code that made the charge, when known
}

// NewLedger returns a root ledger named name (for reports, e.g. "cpu") with
// the given budget in bytes; a budget <= 0 means unlimited.
func NewLedger(name string, budget int64) *Ledger {
	l := &Ledger{name: name, budget: budget, owners: make(map[ownerKey]*ownerEntry)}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Sub returns a child ledger with its own budget (<= 0: only the parent's
// limits apply). Its charges count in l as well.
func (l *Ledger) Sub(name string, budget int64) *Ledger {
	c := NewLedger(name, budget)
	c.parent = l
	return c
}

// Name returns the ledger's name.
func (l *Ledger) Name() string { return l.name }

// Budget returns the budget in bytes (<= 0: unlimited).
func (l *Ledger) Budget() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.budget
}

// SetBudget changes the budget. Live bytes above a lowered budget stay; new
// charges fail until enough is released.
func (l *Ledger) SetBudget(b int64) {
	l.mu.Lock()
	l.budget = b
	l.mu.Unlock()
	l.cond.Broadcast()
}

// SetLargestFree installs a function that reports the largest free block of
// the memory behind this ledger; OOM reports include it.
func (l *Ledger) SetLargestFree(f func() int64) {
	l.mu.Lock()
	l.largestFree = f
	l.mu.Unlock()
}

// Charge records bytes for (cat, owner). If the ledger or an ancestor would
// exceed its budget, nothing is charged and the error is an *OOMError.
func (l *Ledger) Charge(cat Category, owner string, bytes int64) error {
	if bytes < 0 {
		panic("mem: negative charge")
	}
	return l.charge(cat, owner, bytes, nil)
}

// charge charges l and its ancestors, all or nothing. When ctx is non-nil it
// blocks on l (the innermost ledger) until the charge fits or ctx ends.
func (l *Ledger) charge(cat Category, owner string, bytes int64, ctx context.Context) error {
	l.mu.Lock()
	for l.budget > 0 && l.live+bytes > l.budget {
		if ctx == nil || bytes > l.budget {
			err := l.oomLocked(cat, owner, bytes)
			l.mu.Unlock()
			return err
		}
		if ctx.Err() != nil {
			l.mu.Unlock()
			return ctx.Err()
		}
		l.cond.Wait()
	}
	if l.parent != nil {
		if err := l.parent.charge(cat, owner, bytes, nil); err != nil {
			l.mu.Unlock()
			return err
		}
	}
	l.addLocked(cat, owner, bytes)
	l.mu.Unlock()
	return nil
}

// ChargeWait is Charge with backpressure: while the charge does not fit this
// ledger's budget it waits for releases, until ctx is done (returning
// ctx.Err()). A request larger than the whole budget fails at once with
// *OOMError, as does one that an ancestor's budget refuses.
func (l *Ledger) ChargeWait(ctx context.Context, cat Category, owner string, bytes int64) error {
	if bytes < 0 {
		panic("mem: negative charge")
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			l.mu.Lock()
			l.cond.Broadcast()
			l.mu.Unlock()
		})
		defer stop()
	}
	return l.charge(cat, owner, bytes, ctx)
}

func (l *Ledger) addLocked(cat Category, owner string, bytes int64) {
	k := ownerKey{cat, owner}
	e := l.owners[k]
	if e == nil {
		e = &ownerEntry{}
		l.owners[k] = e
	}
	e.live += bytes
	e.count++
	e.peak = max(e.peak, e.live)
	l.byCat[cat] += bytes
	l.live += bytes
	if l.live > l.peak {
		l.peak = l.live
		l.peakBy = l.byCat
	}
}

// SetSite records file:line as where (cat, owner)'s memory is charged
// from, for reports; the first site recorded for an owner is kept.
func (l *Ledger) SetSite(cat Category, owner, site string) {
	l.mu.Lock()
	if e := l.owners[ownerKey{cat, owner}]; e != nil && e.site == "" {
		e.site = site
	}
	l.mu.Unlock()
	if l.parent != nil {
		l.parent.SetSite(cat, owner, site)
	}
}

// Release returns bytes charged earlier to (cat, owner). Releasing more than
// was charged is a programmer error and panics.
func (l *Ledger) Release(cat Category, owner string, bytes int64) {
	l.mu.Lock()
	e := l.owners[ownerKey{cat, owner}]
	if e == nil || e.live < bytes {
		l.mu.Unlock()
		panic("mem: release of " + owner + " (" + cat.String() + ") exceeds what was charged")
	}
	e.live -= bytes
	e.count--
	l.byCat[cat] -= bytes
	l.live -= bytes
	l.mu.Unlock()
	l.cond.Broadcast()
	if l.parent != nil {
		l.parent.Release(cat, owner, bytes)
	}
}

// Live returns the bytes charged now.
func (l *Ledger) Live() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live
}

// Peak returns the largest Live since the ledger was made or ResetPeak.
func (l *Ledger) Peak() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

// ResetPeak sets the peak to the current live bytes.
func (l *Ledger) ResetPeak() {
	l.mu.Lock()
	l.peak = l.live
	l.peakBy = l.byCat
	for _, e := range l.owners {
		e.peak = e.live
	}
	l.mu.Unlock()
}

// LiveBy returns the live bytes of one category.
func (l *Ledger) LiveBy(c Category) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byCat[c]
}

// Totals returns the live bytes of every category.
func (l *Ledger) Totals() [NumCategories]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byCat
}

// PeakTotals returns the category totals at the moment of the peak.
func (l *Ledger) PeakTotals() [NumCategories]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peakBy
}

// Top returns up to n owners with the most live bytes, largest first (n <= 0: all).
func (l *Ledger) Top(n int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topLocked(n)
}

func (l *Ledger) topLocked(n int) []Entry {
	var out []Entry
	for k, e := range l.owners {
		if e.live > 0 {
			out = append(out, Entry{Owner: k.owner, Category: k.cat, Bytes: e.live, Count: e.count, Site: e.site})
		}
	}
	sortEntries(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Bytes != es[j].Bytes {
			return es[i].Bytes > es[j].Bytes
		}
		if es[i].Owner != es[j].Owner {
			return es[i].Owner < es[j].Owner
		}
		return es[i].Category < es[j].Category
	})
}

// Snapshot is the ledger's state at one moment: totals and every owner's live bytes.
type Snapshot struct {
	Live   int64
	Totals [NumCategories]int64
	Owners []Entry // sorted largest first
}

// Snapshot returns the current state (taken at epoch ends to find growth).
func (l *Ledger) Snapshot() Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Snapshot{Live: l.live, Totals: l.byCat, Owners: l.topLocked(0)}
}

// Growth returns, for every owner whose live bytes grew from prev to s, the
// increase, largest first. An empty result means no growth.
func (s Snapshot) Growth(prev Snapshot) []Entry {
	before := make(map[ownerKey]int64, len(prev.Owners))
	for _, e := range prev.Owners {
		before[ownerKey{e.Category, e.Owner}] = e.Bytes
	}
	var out []Entry
	for _, e := range s.Owners {
		if d := e.Bytes - before[ownerKey{e.Category, e.Owner}]; d > 0 {
			out = append(out, Entry{Owner: e.Owner, Category: e.Category, Bytes: d, Count: e.Count, Site: e.Site})
		}
	}
	sortEntries(out)
	return out
}

func (l *Ledger) oomLocked(cat Category, owner string, bytes int64) *OOMError {
	e := &OOMError{
		Ledger:      l.name,
		Category:    cat,
		Owner:       owner,
		Request:     bytes,
		Budget:      l.budget,
		Live:        l.live,
		Totals:      l.byCat,
		Top:         l.topLocked(10),
		LargestFree: -1,
	}
	if l.largestFree != nil {
		e.LargestFree = l.largestFree()
	}
	return e
}
