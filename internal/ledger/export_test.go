package ledger

// QueuedMetrics is how many metrics writes wait for a statement.
func QueuedMetrics(s *Store) int {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	return len(s.metrics.queue)
}
