// Package auditlog reads the audit log that the test control planes' API
// servers write (the benchmark's and the end-to-end scenarios'): the events of
// one stretch of it, and percentiles of the delays measured from them.
package auditlog

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event is what the tests read of an audit log line.
type Event struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage  `json:"requestObject"`
	Received      metav1.MicroTime `json:"requestReceivedTimestamp"`
	Done          metav1.MicroTime `json:"stageTimestamp"`
}

// Size is where the log ends now: a mark to Read from.
func Size(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Read reads the events logged between two marks (to 0: up to the end). A
// line still being written is skipped.
func Read(path string, from, to int64) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = f
	if to > 0 {
		r = io.LimitReader(f, to-from)
	}
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			events = append(events, ev)
		}
	}
	return events, sc.Err()
}

// Percentile is the p-th percentile of d (nearest rank), 0 for none.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}
