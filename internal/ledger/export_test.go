package ledger

// QueuedMetrics is how many metrics writes wait for a statement.
func QueuedMetrics(s *Store) int {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	return len(s.metrics.queue)
}

// QueuedOpens is how many opens of client wait for a transaction.
func QueuedOpens(s *Store, client string) int {
	s.opens.mu.Lock()
	defer s.opens.mu.Unlock()
	return len(s.opens.waiting[client])
}
