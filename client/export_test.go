package client

// LeaseWaits is how many times l's request path waited for a lease.
func LeaseWaits(l *Limiter) int {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	return l.leases.waits
}

// LeaseKeys is how many keys l's lease mode holds.
func LeaseKeys(l *Limiter) int {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	return len(l.leases.keys)
}
