package convert

// DeepEval test runs (confident-ai/deepeval, deepeval/test_run/test_run.py
// and api.py). Three files hold a TestRun: .deepeval/.latest_test_run.json as
// {"testRunData": TestRun} (3.0.6 on; {"testRunLink": url} alone when the run
// was posted to Confident AI), .deepeval/.latest_run_full.json (4.0 on) and
// the files of DEEPEVAL_RESULTS_FOLDER (every version), both the TestRun itself.
//
// Cases are added in file order: testCases then conversationalTestCases, as
// deepeval writes them. Of a case only name, success, completionTime and
// tokenCost (2.6.6 on, set by the user for the agent's call) and its metrics'
// name, success and error are read: metricsData, or metricsMetadata named by
// metric before 0.21.78. Inputs, outputs, contexts, turns, traces, metric
// reasons and the run's identifier are skipped. runDuration and evaluationCost
// measure the judging metrics (evaluate/execute/e2e.py), not the agent, and
// the metrics' token counts are the judge's: none is read.

// readDeepEval reads one DeepEval file.
func readDeepEval(path string, s *sink) error {
	j, f, err := openJSONObject(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var hasRun, hasLink bool
	err = j.object(func(name string) error {
		switch name {
		case "testRunData":
			hasRun = true
			return j.object(func(name string) error {
				_, err := readDeepEvalMember(j, s, name)
				return err
			})
		case "testRunLink":
			hasLink = true
			return j.skip()
		}
		cases, err := readDeepEvalMember(j, s, name)
		hasRun = hasRun || cases
		return err
	})
	if err != nil {
		return err
	}
	if err := j.end(); err != nil {
		return err
	}
	switch {
	case hasRun:
		return nil
	case hasLink:
		return &UnusableError{
			Reason: path + " only links to the test run on Confident AI",
			Hint: "convert the local results instead: .deepeval/.latest_run_full.json (deepeval 4.0 on writes it on every run), " +
				"or the file of the run in the folder set by DEEPEVAL_RESULTS_FOLDER (with older versions, set it and run again)",
		}
	}
	return errNotFormat
}

// readDeepEvalMember reads a TestRun member: the cases of the two lists,
// skipping any other. cases reports whether name was one of the lists.
func readDeepEvalMember(j *jsonReader, s *sink, name string) (cases bool, err error) {
	if name != "testCases" && name != "conversationalTestCases" {
		return false, j.skip()
	}
	return true, j.array(func(int) error { return readDeepEvalCase(j, s) })
}

// readDeepEvalCase reads an LLMApiTestCase or a ConversationalApiTestCase.
func readDeepEvalCase(j *jsonReader, s *sink) error {
	if j.kind() != '{' {
		return j.skip()
	}
	var (
		name             string
		success, errored bool
		completion       float64
		hasCompletion    bool
		c                Case
	)
	err := j.object(func(member string) error {
		switch member {
		case "name":
			v, _, err := j.str()
			name = v
			return err
		case "success":
			v, _, err := j.boolean()
			success = v
			return err
		case "completionTime":
			v, ok, err := j.number()
			completion, hasCompletion = v, ok
			return err
		case "tokenCost":
			v, ok, err := j.number()
			if ok {
				c.Cost = &v
			}
			return err
		case "metricsData", "metricsMetadata":
			return j.array(func(int) error {
				check, failed, ok, err := readDeepEvalMetric(j, s)
				if ok {
					c.ToolChecks = append(c.ToolChecks, check)
					errored = errored || failed
				}
				return err
			})
		}
		return j.skip()
	})
	if err != nil {
		return err
	}
	switch {
	case errored:
		c.Status = Error
	case success:
		c.Status = Pass
	default:
		c.Status = Fail
	}
	if hasCompletion {
		c.LatencyMS = completion * 1000
	} else {
		s.warn(warnNoLatency)
	}
	c.ID = s.caseID(name, "")
	s.add(c)
	return nil
}

// readDeepEvalMetric reads a MetricData (or the older MetricMetadata). Any
// error that is not null counts, an empty one too: deepeval itself tests
// "error is None", and the text is never read.
func readDeepEvalMetric(j *jsonReader, s *sink) (check ToolCheck, errored, ok bool, err error) {
	if j.kind() != '{' {
		return check, false, false, j.skip()
	}
	var name, oldName string
	var success bool
	err = j.object(func(member string) error {
		switch member {
		case "name":
			v, _, err := j.str()
			name = v
			return err
		case "metric":
			v, _, err := j.str()
			oldName = v
			return err
		case "success":
			v, _, err := j.boolean()
			success = v
			return err
		case "error":
			null, err := j.isNull()
			if err != nil || null {
				return err
			}
			errored = true
		}
		return j.skip()
	})
	if err != nil {
		return check, false, false, err
	}
	if name == "" {
		name = oldName
	}
	return s.check(name, success), errored, true, nil
}

// looksDeepEval knows the wrapper of .latest_test_run.json, or a TestRun by
// its lists of cases beside its counts.
func looksDeepEval(sh *shape) bool {
	if sh.has("testRunData") || sh.has("testRunLink") {
		return true
	}
	cases := sh.has("testCases") || sh.has("conversationalTestCases")
	return cases && (sh.has("metricsScores") || sh.has("testPassed") || sh.has("testFailed"))
}
