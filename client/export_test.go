package client

// LeaseWaits is how many times l's request path waited for a lease.
func LeaseWaits(l *Limiter) int {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	return l.leases.waits
}
