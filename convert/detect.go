package convert

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxShapeObjects bounds how many object-valued top-level members a shape
// records the names of, so that detection stays small on any file.
const maxShapeObjects = 64

// shape is the outline of a JSON document that detection looks at: the names
// of its top-level members and, for the first object-valued ones, theirs.
type shape struct {
	keys map[string]bool
	sub  map[string]map[string]bool
}

// has reports whether the document has all these top-level members.
func (sh *shape) has(names ...string) bool {
	for _, n := range names {
		if !sh.keys[n] {
			return false
		}
	}
	return true
}

// subHas reports whether the top-level member top is an object with all these members.
func (sh *shape) subHas(top string, names ...string) bool {
	m := sh.sub[top]
	for _, n := range names {
		if !m[n] {
			return false
		}
	}
	return m != nil
}

// FormatRequest is what Detect names a file that is a metrics request
// already (run_id and cases at its top level): evalmeter submit posts it as
// it is, and Convert refuses it, as there is nothing to convert.
const FormatRequest = "request"

// looksRequest knows a metrics request by the two members it must have. An
// extra member still makes it one: the engine then names the member it refuses.
func looksRequest(sh *shape) bool { return sh.has("run_id", "cases") }

// Detect names the format of a results file or directory, FormatRequest for a
// metrics request, or "" when it is none of these. Its error is for a file
// that cannot be read.
func Detect(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return detectDir(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, err := br.Peek(512)
	if err != nil && err != io.EOF {
		return "", err
	}
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return "inspect", nil // an .eval log is a zip
	case bytes.HasPrefix(head, []byte("<")):
		if isJUnit(br) {
			return "junit", nil
		}
		return "", nil
	case bytes.HasPrefix(head, []byte("{")):
		sh, err := readShape(br, path)
		if err != nil {
			return "", nil // not JSON: none of ours
		}
		if looksRequest(sh) {
			return FormatRequest, nil
		}
		for _, f := range formats {
			if f.looks != nil && f.looks(sh) {
				return f.name, nil
			}
		}
	case bytes.HasPrefix(head, []byte("[")):
		// An array of samples: lm-evaluation-harness before 0.4.3.
		if sh, err := readFirstShape(br, path); err == nil && looksLmeval(sh) {
			return "lmeval", nil
		}
	}
	return "", nil
}

// errShapeRead stops an array after its first element.
var errShapeRead = errors.New("shape read")

// readFirstShape reads the outline of the first element of a JSON array.
func readFirstShape(r io.Reader, name string) (*shape, error) {
	j := newJSONReader(r, name)
	var sh *shape
	err := j.array(func(int) error {
		if j.kind() != '{' {
			return errors.New("not an object")
		}
		var err error
		sh, err = shapeOf(j)
		if err != nil {
			return err
		}
		return errShapeRead
	})
	if !errors.Is(err, errShapeRead) {
		if err == nil {
			err = errors.New("no element")
		}
		return nil, err
	}
	return sh, nil
}

// detectDir recognises a tau2 results directory, an lm-evaluation-harness output
// directory and a SWE-bench log directory.
func detectDir(path string) (string, error) {
	if _, err := os.Stat(filepath.Join(path, "results.json")); err == nil {
		if looks, err := Detect(filepath.Join(path, "results.json")); err == nil && looks == "tau2" {
			return "tau2", nil
		}
	}
	if fi, err := os.Stat(filepath.Join(path, "simulations")); err == nil && fi.IsDir() {
		return "tau2", nil
	}
	// lm-evaluation-harness's output path: samples (or only aggregates), in it or
	// in the model's directory below it.
	if files, _ := lmevalSamplesFiles(path); len(files) > 0 || len(lmevalResultsFiles(path)) > 0 {
		return "lmeval", nil
	}
	// The SWE-bench harness's logs/run_evaluation/<run>/<model>/<instance>/report.json,
	// from any of those levels.
	for _, pattern := range []string{"report.json", "*/report.json", "*/*/report.json", "*/*/*/report.json"} {
		if matches, _ := filepath.Glob(filepath.Join(path, pattern)); len(matches) > 0 {
			if looks, err := Detect(matches[0]); err == nil && looks == "swebench" {
				return "swebench", nil
			}
			break
		}
	}
	return "", nil
}

// DetectFiles names the one format of all paths, FormatRequest included (of
// one file alone). Its errors say what to do: name the format, or convert
// each format on its own.
func DetectFiles(paths []string) (string, error) {
	found := ""
	for _, p := range paths {
		name, err := Detect(p)
		if err != nil {
			return "", err
		}
		if name == "" {
			return "", fmt.Errorf("%s: cannot tell which tool wrote it, nor is it a metrics request; name the format with --from (%s)", p, strings.Join(Formats(), ", "))
		}
		if name == FormatRequest && len(paths) > 1 {
			return "", fmt.Errorf("%s is a metrics request: submit it on its own (a request is posted as it is, never merged with other files)", p)
		}
		if found != "" && name != found {
			return "", fmt.Errorf("the files are of different formats (%s and %s): convert each format on its own", found, name)
		}
		found = name
	}
	return found, nil
}

// isJUnit reports whether the XML document's root is <testsuites> or <testsuite>.
func isJUnit(r io.Reader) bool {
	d := xml.NewDecoder(r)
	d.CharsetReader = func(charset string, in io.Reader) (io.Reader, error) {
		if strings.EqualFold(charset, "us-ascii") || strings.EqualFold(charset, "ascii") {
			return in, nil // a subset of UTF-8
		}
		return nil, fmt.Errorf("encoding %s", charset)
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local == "testsuites" || se.Name.Local == "testsuite"
		}
	}
}

// readShape reads the outline of a JSON object document.
func readShape(r io.Reader, name string) (*shape, error) {
	j := newJSONReader(r, name)
	if j.kind() != '{' {
		return nil, errors.New("not an object")
	}
	return shapeOf(j)
}

// shapeOf reads the outline of the object that comes next.
func shapeOf(j *jsonReader) (*shape, error) {
	sh := &shape{keys: map[string]bool{}, sub: map[string]map[string]bool{}}
	err := j.object(func(top string) error {
		sh.keys[top] = true
		if j.kind() != '{' || len(sh.sub) >= maxShapeObjects {
			return j.skip()
		}
		names := map[string]bool{}
		sh.sub[top] = names
		return j.object(func(n string) error {
			names[n] = true
			return j.skip()
		})
	})
	if err != nil {
		return nil, err
	}
	return sh, nil
}
