package server

// PruneOnce is one round of PruneMetrics, for tests.
var PruneOnce = (*Server).pruneOnce
