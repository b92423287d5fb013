// Package xmlcheck tells whether a page is well-formed XML, for the tests of the
// HTML report that `redlock safety --html` writes (the page is meant to parse as XML,
// so that a broken tag shows up in a test rather than in a browser).
package xmlcheck

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// WellFormed returns an error unless page parses as strict XML from start to end.
func WellFormed(page string) error {
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if depth != 0 {
				return errors.New("unclosed elements at the end")
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
}
