package convert

import "errors"

// TODO(issue 9): being written.
func readDeepEval(path string, s *sink) error { return errors.New("deepeval: not implemented yet") }

func looksDeepEval(sh *shape) bool { return false }
