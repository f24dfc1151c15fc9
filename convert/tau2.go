package convert

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tau2-bench results (sierra-research/tau2-bench, src/tau2/data_model/simulation.py).
//
// Two layouts are read: the "json" one, a Results document with info, tasks
// and simulations (every version, and text runs today), and the "dir" one
// (v1.0.1 on, voice runs): results.json with info, tasks and simulation_index
// beside simulations/<id>.json, one SimulationRun each, read in name order as
// tau2 loads them. A directory holding only a json-layout results.json is read
// too, as run.py saves it under data/simulations/<run>/.
//
// Of a simulation only task_id, trial, duration, termination_reason,
// agent_cost, reward_info.reward, reward_info.action_checks[].action.name and
// .action_match, and messages[].role and .usage.prompt_tokens and
// .completion_tokens are read. Tasks, message content, tool calls, reviews
// and voice ticks are skipped, and so is agent_usage of voice runs: the rules
// count the assistant messages' usage only.

// tau2Reasons are the termination reasons that decide a status on their own;
// the others (user_stop, agent_stop, new ones) leave it to the reward.
var tau2Reasons = map[string]Status{
	"max_steps":               Timeout,
	"timeout":                 Timeout,
	"agent_error":             Error,
	"user_error":              Error,
	"too_many_errors":         Error,
	"infrastructure_error":    Error,
	"context_window_exceeded": Error,
	"unexpected_error":        Error,
}

// tau2PassReward absorbs the float sums that make a full reward 0.9999999999.
const tau2PassReward = 1 - 1e-9

// tau2MaxTrial bounds the trials kept as numbers; others count as missing.
const tau2MaxTrial = 1_000_000_000

// tau2Sim is a simulation read but not yet added: its repeat group depends
// on the simulations that follow.
type tau2Sim struct {
	taskID string
	trial  int // -1 when missing
	c      Case
}

// readTau2 reads a Results file or a results directory.
func readTau2(path string, s *sink) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	var sims []tau2Sim
	if fi.IsDir() {
		sims, err = readTau2Dir(path, s)
	} else {
		sims, err = readTau2File(path, s)
	}
	if err != nil {
		return err
	}
	addTau2(sims, s)
	return nil
}

// readTau2Dir reads a results directory, the way tau2's Results.load does:
// simulations/ when there is one, else results.json.
func readTau2Dir(dir string, s *sink) ([]tau2Sim, error) {
	simsDir := filepath.Join(dir, "simulations")
	if fi, err := os.Stat(simsDir); err == nil && fi.IsDir() {
		return readTau2SimFiles(simsDir, s)
	}
	results := filepath.Join(dir, "results.json")
	if _, err := os.Stat(results); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errNotFormat
		}
		return nil, err
	}
	return readTau2File(results, s)
}

// readTau2File reads a Results document, or the results.json of the dir
// layout and then the simulations/ beside it.
func readTau2File(path string, s *sink) ([]tau2Sim, error) {
	j, f, err := openJSONObject(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var sims []tau2Sim
	var hasSims, hasIndex, hasRun bool
	err = j.object(func(name string) error {
		switch name {
		case "simulations":
			hasSims = true
			return j.array(func(int) error {
				sim, ok, err := readTau2Sim(j, s)
				if ok {
					sims = append(sims, sim)
				}
				return err
			})
		case "simulation_index":
			hasIndex = true
		case "info", "tasks":
			hasRun = true
		}
		return j.skip()
	})
	if err != nil {
		return nil, err
	}
	if err := j.end(); err != nil {
		return nil, err
	}
	switch {
	case !hasRun || !hasSims && !hasIndex:
		return nil, errNotFormat
	case hasSims:
		return sims, nil
	}
	simsDir := filepath.Join(filepath.Dir(path), "simulations")
	if fi, err := os.Stat(simsDir); err != nil || !fi.IsDir() {
		return nil, &UnusableError{
			Reason: path + " is the index of a tau2 results directory whose simulations/ is missing",
			Hint:   "convert the results directory that holds results.json and simulations/, as tau2 wrote it",
		}
	}
	return readTau2SimFiles(simsDir, s)
}

// readTau2SimFiles reads simulations/*.json in name order, one file at a time.
func readTau2SimFiles(dir string, s *sink) ([]tau2Sim, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	var sims []tau2Sim
	for _, e := range entries {
		name := e.Name()
		// Dot files are editors' and writers' temporary files.
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		sim, ok, err := readTau2SimFile(filepath.Join(dir, name), s)
		if err != nil {
			return nil, err
		}
		if ok {
			sims = append(sims, sim)
		}
	}
	return sims, nil
}

func readTau2SimFile(path string, s *sink) (tau2Sim, bool, error) {
	j, f, err := openJSONObject(path)
	if err == errNotFormat {
		return tau2Sim{}, false, &UnusableError{
			Reason: path + " is not a tau2 simulation",
			Hint:   "keep only the simulation files tau2 wrote in simulations/",
		}
	}
	if err != nil {
		return tau2Sim{}, false, err
	}
	defer f.Close()
	sim, ok, err := readTau2Sim(j, s)
	if err != nil {
		return sim, ok, err
	}
	return sim, ok, j.end()
}

// readTau2Sim reads one SimulationRun. ok is false when the value is not an object.
func readTau2Sim(j *jsonReader, s *sink) (sim tau2Sim, ok bool, err error) {
	if j.kind() != '{' {
		return sim, false, j.skip()
	}
	sim.trial = -1
	var (
		reason              string
		reward              float64
		hasReward           bool
		duration            float64
		hasDuration         bool
		inTokens, outTokens float64
		hasIn, hasOut       bool
		expected, matched   int
	)
	c := &sim.c
	err = j.object(func(name string) error {
		switch name {
		case "task_id":
			id, _, err := j.id()
			sim.taskID = id
			return err
		case "trial":
			v, ok, err := j.number()
			if ok && v >= 0 && v <= tau2MaxTrial && v == float64(int(v)) {
				sim.trial = int(v)
			}
			return err
		case "duration":
			v, ok, err := j.number()
			duration, hasDuration = v, ok
			return err
		case "termination_reason":
			v, _, err := j.str()
			reason = v
			return err
		case "agent_cost":
			v, ok, err := j.number()
			if ok {
				c.Cost = &v
			}
			return err
		case "reward_info":
			return j.object(func(name string) error {
				switch name {
				case "reward":
					v, ok, err := j.number()
					reward, hasReward = v, ok
					return err
				case "action_checks":
					return j.array(func(int) error {
						check, ok, err := readTau2ActionCheck(j, s)
						if ok {
							c.ToolChecks = append(c.ToolChecks, check)
							expected++
							if check.Passed {
								matched++
							}
						}
						return err
					})
				}
				return j.skip()
			})
		case "messages":
			return j.array(func(int) error {
				return readTau2Message(j, func(prompt, completion float64, hasPrompt, hasCompletion bool) {
					if hasPrompt {
						inTokens += prompt
						hasIn = true
					}
					if hasCompletion {
						outTokens += completion
						hasOut = true
					}
				})
			})
		}
		return j.skip()
	})
	if err != nil {
		return sim, false, err
	}

	switch st, ok := tau2Reasons[reason]; {
	case ok:
		c.Status = st
	case hasReward && reward >= tau2PassReward:
		c.Status = Pass
	default:
		c.Status = Fail
	}
	if hasDuration {
		c.LatencyMS = duration * 1000
	} else {
		s.warn(warnNoLatency)
	}
	if hasIn {
		c.InputTokens = s.tokens(inTokens)
	}
	if hasOut {
		c.OutputTokens = s.tokens(outTokens)
	}
	if expected > 0 {
		c.Trace = &Trace{ExpectedSteps: expected, ObservedSteps: matched}
	}
	return sim, true, nil
}

// readTau2ActionCheck reads one ActionCheck: action.name and action_match.
func readTau2ActionCheck(j *jsonReader, s *sink) (ToolCheck, bool, error) {
	if j.kind() != '{' {
		return ToolCheck{}, false, j.skip()
	}
	var name string
	var match bool
	err := j.object(func(member string) error {
		switch member {
		case "action":
			return j.object(func(member string) error {
				if member != "name" {
					return j.skip()
				}
				v, _, err := j.str()
				name = v
				return err
			})
		case "action_match":
			v, _, err := j.boolean()
			match = v
			return err
		}
		return j.skip()
	})
	if err != nil {
		return ToolCheck{}, false, err
	}
	return s.check(name, match), true, nil
}

// readTau2Message reads a message's role and usage, and reports the usage
// of an assistant message. Members may come in any order.
func readTau2Message(j *jsonReader, report func(prompt, completion float64, hasPrompt, hasCompletion bool)) error {
	var role string
	var prompt, completion float64
	var hasPrompt, hasCompletion bool
	err := j.object(func(name string) error {
		switch name {
		case "role":
			v, _, err := j.str()
			role = v
			return err
		case "usage":
			return j.object(func(name string) error {
				var err error
				switch name {
				case "prompt_tokens":
					prompt, hasPrompt, err = j.number()
				case "completion_tokens":
					completion, hasCompletion, err = j.number()
				default:
					err = j.skip()
				}
				return err
			})
		}
		return j.skip()
	})
	if err == nil && role == "assistant" {
		report(prompt, completion, hasPrompt, hasCompletion)
	}
	return err
}

// addTau2 names the simulations of one file or directory and adds them in
// order. A task with more than one simulation is a repeat group.
func addTau2(sims []tau2Sim, s *sink) {
	count := make(map[string]int, len(sims))
	for _, sim := range sims {
		count[sim.taskID]++
	}
	seen := make(map[string]int, len(count))
	for _, sim := range sims {
		trial := sim.trial
		if trial < 0 { // older or hand-made runs: the simulation's rank in its task
			trial = seen[sim.taskID]
		}
		seen[sim.taskID]++
		c := sim.c
		c.ID = s.caseID(sim.taskID, ":t"+strconv.Itoa(trial))
		if count[sim.taskID] > 1 && sim.taskID != "" {
			// fitID, not caseID: the case id has already counted a rewrite.
			c.RepeatGroup, _ = fitID(sim.taskID, "", maxIDLen)
		}
		s.add(c)
	}
}

// looksTau2 knows a Results document by its simulations, or the dir
// layout's results.json by its simulation_index, beside info or tasks.
func looksTau2(sh *shape) bool {
	return (sh.has("simulations") || sh.has("simulation_index")) && (sh.has("info") || sh.has("tasks"))
}
