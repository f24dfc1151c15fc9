package convert

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// JUnit XML, as pytest --junitxml (xunit1 and xunit2), jest-junit, Maven
// Surefire and Failsafe (surefire-test-report-3.0.xsd), Ant and others write
// it. The root is <testsuites> or <testsuite>; a case is every <testcase> in
// any nesting of suites.
//
// Of a testcase only the attributes name, classname and time are read, and
// which children it has: skipped, error, failure (whose message and type are
// searched for "timeout", and dropped) and Surefire's flakyFailure and
// flakyError. Everything else is skipped unread: properties, system-out,
// system-err, the text of failures and errors, file and line attributes, and
// the suites' names and counts. A Surefire case with flakyFailure or
// flakyError but no failure or error failed and then passed on a rerun: it is
// a pass, counted in a warning. rerunFailure and rerunError only repeat a
// failure or error the case already has. JUnit XML has no run id.

// warnFlakyPassed counts Surefire's flaky cases.
const warnFlakyPassed = "%d cases failed and then passed on a rerun (flaky); sent as pass"

// readJUnit reads one JUnit XML file.
func readJUnit(path string, s *sink) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errNotFormat
	}
	x := &junitReader{path: path}
	x.d = xml.NewDecoder(&xmlCleaner{r: bufio.NewReaderSize(f, 64<<10)})
	x.d.CharsetReader = x.charset

	// Anything but an XML document with a JUnit root is another tool's file.
	for {
		tok, err := x.d.Token()
		if err != nil {
			if x.charErr {
				return x.fail(err)
			}
			return errNotFormat
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "testsuites" && se.Name.Local != "testsuite" {
				return errNotFormat
			}
			break
		}
	}
	// Suites nest; depth counts the open ones, so that no input can grow the stack.
	for depth := 1; depth > 0; {
		tok, err := x.d.Token()
		if err != nil {
			return x.fail(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "testsuites", "testsuite":
				depth++
			case "testcase":
				if err := x.testcase(t, s); err != nil {
					return err
				}
			default:
				if err := x.d.Skip(); err != nil {
					return x.fail(err)
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

type junitReader struct {
	d       *xml.Decoder
	path    string
	charErr bool // the document declares an encoding we do not read
}

// testcase reads the case that starts with se, up to its end element.
func (x *junitReader) testcase(se xml.StartElement, s *sink) error {
	var name, classname, timeAttr string
	hasTime := false
	for _, a := range se.Attr {
		switch a.Name.Local {
		case "name":
			name = a.Value
		case "classname":
			classname = a.Value
		case "time":
			timeAttr, hasTime = a.Value, true
		}
	}
	var skipped, errored, failed, timedOut, flaky bool
	for done := false; !done; {
		tok, err := x.d.Token()
		if err != nil {
			return x.fail(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "skipped":
				skipped = true
			case "error":
				errored = true
			case "failure":
				failed = true
				timedOut = timedOut || mentionsTimeout(t.Attr)
			case "flakyFailure", "flakyError":
				flaky = true
			}
			if err := x.d.Skip(); err != nil {
				return x.fail(err)
			}
		case xml.EndElement:
			done = true
		}
	}
	if skipped {
		s.warn(warnSkippedDropped)
		return nil
	}

	c := Case{Status: Pass}
	switch {
	case errored:
		c.Status = Error
	case failed && timedOut:
		c.Status = Timeout
	case failed:
		c.Status = Fail
	case flaky:
		s.warn(warnFlakyPassed)
	}
	id := name
	if classname != "" {
		id = classname + "." + name
	}
	c.ID = s.caseID(id, "")
	if secs, ok := parseJUnitTime(timeAttr); hasTime && ok {
		// Rounded to the microsecond, to drop the noise of the product.
		c.LatencyMS = math.Round(secs*1e6) / 1e3
	} else {
		s.warn(warnNoLatency)
	}
	s.add(c)
	return nil
}

// mentionsTimeout reports whether a failure's message or type says timeout.
// The message is free text: it is looked at here and not kept.
func mentionsTimeout(attrs []xml.Attr) bool {
	for _, a := range attrs {
		if (a.Name.Local == "message" || a.Name.Local == "type") &&
			strings.Contains(strings.ToLower(a.Value), "timeout") {
			return true
		}
	}
	return false
}

// groupedTime is a time with thousands separators, as Surefire writes times
// of 1000 s and more ("1,234.5").
var groupedTime = regexp.MustCompile(`^[1-9][0-9]{0,2}(,[0-9]{3})+(\.[0-9]*)?$`)

// parseJUnitTime reads a time in seconds. A comma is a thousands separator
// where it groups digits by three, else a decimal comma ("0,5").
func parseJUnitTime(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	switch {
	case groupedTime.MatchString(v):
		v = strings.ReplaceAll(v, ",", "")
	case strings.Count(v, ",") == 1 && !strings.Contains(v, "."):
		v = strings.Replace(v, ",", ".", 1)
	}
	secs, err := strconv.ParseFloat(v, 64)
	return secs, err == nil
}

// charset accepts the encodings that are UTF-8 already and refuses others.
func (x *junitReader) charset(label string, r io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "us-ascii", "ascii", "utf8":
		return r, nil
	}
	x.charErr = true
	return nil, errors.New("unsupported encoding")
}

// fail describes a read error by its place, never by the content around it:
// the messages of encoding/xml quote names and entities of the document.
func (x *junitReader) fail(err error) error {
	var se *xml.SyntaxError
	var pe *os.PathError
	switch {
	case x.charErr:
		return fmt.Errorf("%s: the XML declares an encoding other than UTF-8; save it as UTF-8", x.path)
	case errors.As(err, &se) && se.Msg == "unexpected EOF", err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: the XML ends early: the file is truncated", x.path)
	case errors.As(err, &se):
		return fmt.Errorf("%s: malformed XML on line %d", x.path, se.Line)
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", x.path, err)
	}
	return fmt.Errorf("%s: malformed XML", x.path)
}

// xmlCleaner blanks the characters XML 1.0 forbids, raw or as character
// references (&#27;): test output carries them (ANSI colours), some writers
// leave them in, and encoding/xml refuses the whole document for one.
type xmlCleaner struct {
	r *bufio.Reader
}

func (c *xmlCleaner) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		return 0, err
	}
	switch {
	case b < 0x20 && b != '\t' && b != '\n' && b != '\r':
		return ' ', nil
	case b == '&':
		if n := forbiddenCharRef(c.r); n > 0 {
			c.r.Discard(n)
			return ' ', nil
		}
	}
	return b, nil
}

func (c *xmlCleaner) Read(p []byte) (int, error) {
	for i := range p {
		b, err := c.ReadByte()
		if err != nil {
			return i, err
		}
		p[i] = b
	}
	return len(p), nil
}

// forbiddenCharRef returns the length of the character reference that
// follows an '&' when it names a character XML forbids, else 0.
func forbiddenCharRef(r *bufio.Reader) int {
	p, _ := r.Peek(12)
	if len(p) < 3 || p[0] != '#' {
		return 0
	}
	base, digits := 10, p[1:]
	if p[1] == 'x' || p[1] == 'X' {
		base, digits = 16, p[2:]
	}
	end := strings.IndexByte(string(digits), ';')
	if end <= 0 {
		return 0
	}
	code, err := strconv.ParseUint(string(digits[:end]), base, 32)
	if err != nil {
		return 0
	}
	switch {
	case code == '\t' || code == '\n' || code == '\r',
		code >= 0x20 && code <= 0xD7FF,
		code >= 0xE000 && code <= 0xFFFD,
		code >= 0x10000 && code <= 0x10FFFF:
		return 0
	}
	return len(p) - len(digits) + end + 1
}
