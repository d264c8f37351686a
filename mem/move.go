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
	l.byCat[from] -= bytes
	k := ownerKey{to, owner}
	d := l.owners[k]
	if d == nil {
		d = &ownerEntry{}
		l.owners[k] = d
	}
	// Counts follow the charge: it moves whole when nothing is left behind.
	if e.live == 0 {
		e.count--
		d.count++
	} else if d.live == 0 {
		d.count++
	}
	d.live += bytes
	d.peak = max(d.peak, d.live)
	l.byCat[to] += bytes
	l.mu.Unlock()
	if l.parent != nil {
		l.parent.Move(from, to, owner, bytes)
	}
}
