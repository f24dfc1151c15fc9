package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/convert"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// EnvIDSalt names the environment variable that holds the key of --hash-ids.
const EnvIDSalt = "EVALMETER_ID_SALT"

// minSaltBytes keeps hashed test names from being guessed by hashing
// candidate names with a short key.
const minSaltBytes = 16

// requestFlags are the flags of convert and submit that say how results
// files become metrics requests.
type requestFlags struct {
	from, runID, currency, saltFile string
	hashIDs, split                  bool
	filter                          string
	passThreshold                   optionalFloat
	caseAttr, repeatAttr, stepsAttr string
}

// optionalFloat is a float flag that may be left unset.
type optionalFloat struct{ v *float64 }

func (o *optionalFloat) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatFloat(*o.v, 'g', -1, 64)
}

func (o *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%q is not a number", s)
	}
	o.v = &v
	return nil
}

func (rf *requestFlags) register(fs *flag.FlagSet, defaultFrom string) {
	fs.StringVar(&rf.from, "from", defaultFrom, "results format: "+strings.Join(convert.Formats(), ", ")+", or auto")
	fs.StringVar(&rf.runID, "run-id", "", "run_id of the request (default: the tool's run id, else one derived from the cases)")
	fs.StringVar(&rf.currency, "currency", "USD", "currency of reported costs: EUR, USD or GBP")
	fs.BoolVar(&rf.hashIDs, "hash-ids", false, "replace case ids and repeat groups by keyed hashes (key from --id-salt-file or "+EnvIDSalt+")")
	fs.StringVar(&rf.saltFile, "id-salt-file", "", "file holding the key of --hash-ids, 16 bytes or more")
	fs.StringVar(&rf.filter, "filter", "", "lmeval: the filter whose lines are read (default: each file's first line's)")
	fs.Var(&rf.passThreshold, "pass-threshold", "lmeval, otel: count a score of at least this as a pass (an lm-eval metric that is not 1 or 0, an evaluation score on a trace)")
	fs.StringVar(&rf.caseAttr, "case-attribute", "", "otel: the span attribute holding the case's id (default: the trace id, which differs between runs)")
	fs.StringVar(&rf.repeatAttr, "repeat-attribute", "", "otel: the span attribute holding the case's repeat group")
	fs.StringVar(&rf.stepsAttr, "expected-steps-attribute", "", "otel: the span attribute holding the steps the case was expected to take")
}

// options turns the flags into convert.Options.
func (rf *requestFlags) options() (convert.Options, error) {
	opts := convert.Options{Format: rf.from, RunID: rf.runID, Currency: rf.currency, Split: rf.split, Filter: rf.filter, PassThreshold: rf.passThreshold.v,
		CaseAttribute: rf.caseAttr, RepeatAttribute: rf.repeatAttr, ExpectedStepsAttribute: rf.stepsAttr}
	if rf.saltFile != "" && !rf.hashIDs {
		return opts, errors.New("--id-salt-file is the key of --hash-ids: add --hash-ids")
	}
	if !rf.hashIDs {
		return opts, nil
	}
	salt := []byte(os.Getenv(EnvIDSalt))
	if rf.saltFile != "" {
		b, err := os.ReadFile(rf.saltFile)
		if err != nil {
			return opts, fmt.Errorf("--id-salt-file: %v", err)
		}
		salt = []byte(strings.TrimSpace(string(b)))
	}
	if len(salt) < minSaltBytes {
		return opts, fmt.Errorf("--hash-ids needs a secret key of at least %d bytes in --id-salt-file or %s, the same for every run you compare, e.g. head -c 32 /dev/urandom | base64 > salt", minSaltBytes, EnvIDSalt)
	}
	opts.IDKey = salt
	return opts, nil
}

// convertFiles converts results files and prints the warnings. Its exit
// status is 1 for results that make no valid request, 2 for a file that is
// not the format or cannot be read.
func convertFiles(cmd string, paths []string, opts convert.Options, stderr io.Writer) (*convert.Result, int) {
	res, err := convert.Convert(paths, opts)
	var unusable *convert.UnusableError
	switch {
	case errors.As(err, &unusable):
		fmt.Fprintf(stderr, "evalmeter %s: %s\n", cmd, err)
		return nil, 1
	case err != nil:
		fmt.Fprintf(stderr, "evalmeter %s: %s\n", cmd, err)
		return nil, 2
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "evalmeter %s: warning: %s\n", cmd, w)
	}
	return res, 0
}

// checkRequest runs the engine on a request as the service would, so that
// no request is sent that the service would refuse.
func checkRequest(body []byte) (*api.Metrics, *api.Error) {
	if len(body) > metrics.MaxBodyBytes {
		return nil, &api.Error{
			Code:    "payload_too_large",
			Message: fmt.Sprintf("the request is %d bytes, more than the %d the service takes", len(body), metrics.MaxBodyBytes),
		}
	}
	m, err := metrics.Compute(body)
	if err != nil {
		var merr *api.Error
		if errors.As(err, &merr) {
			return nil, merr
		}
		return nil, &api.Error{Code: "internal_error", Message: err.Error()}
	}
	return m, nil
}

const convertUsage = `convert [--from FORMAT] [--run-id ID] [--currency C] [--hash-ids] FILE...

Converts the results files of an evaluation tool into one metrics request and
prints it on standard output. Only ids, statuses, latencies, token counts,
costs, check outcomes and step counts are kept; prompts, outputs, messages and
test output are never read into the request. Warnings go to standard error.

Exit status: 0 printed; 1 the results make no valid request (no case, more
than 500, an unscored log); 2 a file is not FORMAT or cannot be read, or the
command line is wrong.`

// convertCmd is evalmeter convert (docs/design.md#112-convert-and-submit).
func convertCmd(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("convert", convertUsage, stderr)
	var rf requestFlags
	rf.register(fs, "auto")
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() == 0 {
		return Failf(stderr, "convert: name the results files, e.g. evalmeter convert --from junit report.xml")
	}
	opts, err := rf.options()
	if err != nil {
		return Failf(stderr, "convert: %v", err)
	}
	res, status := convertFiles("convert", fs.Args(), opts, stderr)
	if status != 0 {
		return status
	}
	body, err := res.Request.Marshal()
	if err != nil {
		return Failf(stderr, "convert: %v", err)
	}
	if _, merr := checkRequest(body); merr != nil {
		fmt.Fprintf(stderr, "evalmeter convert: the converted request would be refused: %s", merr.Message)
		if merr.Field != "" {
			fmt.Fprintf(stderr, " (%s)", merr.Field)
		}
		if merr.Code == "payload_too_large" {
			fmt.Fprint(stderr, "; convert fewer files at a time, or let evalmeter submit --split post it in parts")
		}
		fmt.Fprintln(stderr)
		return 1
	}
	fmt.Fprintf(stderr, "evalmeter convert: %d cases from %s, run id %s\n", len(res.Request.Cases), res.Format, res.Request.RunID)
	stdout.Write(append(body, '\n'))
	return 0
}
