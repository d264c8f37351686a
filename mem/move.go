package mem

// Move re-attributes bytes already charged to (from, owner) to (to, owner),
// atomically and without changing Live or Peak, in this ledger and its
// ancestors. The runtime uses it to show one arena reservation as its
// activation and workspace shares. Moving more than is charged panics.
func (l *Ledger) Move(from, to Category, owner string, bytes int64) {
	l.mu.Lock()
	e := l.owners[ownerKey{from, owner}]
	if e == nil || e.live < bytes {
		l.mu.Unlock()
		panic("mem: move of " + owner + " (" + from.String() + ") exceeds what was charged")
	}
	e.live -= bytes
	if e.live == 0 {
		e.count--
	}
	l.byCat[from] -= bytes
	l.live -= bytes
	l.addLocked(to, owner, bytes)
	l.mu.Unlock()
	if l.parent != nil {
		l.parent.Move(from, to, owner, bytes)
	}
}
