package controllers

import (
	"fmt"
	"unicode/utf8"

	"github.com/winready/winready/api/v1alpha1"
)

// maxMessage is the CRD's limit on status.message, condition messages and
// step messages: a longer string makes the API server reject the whole
// status patch. events.k8s.io/v1 holds an Event's note to the same 1,024
// bytes and refuses a longer one, so the Event would be lost.
const maxMessage = 1024

// bounded cuts s to the status limit, saying how much was cut.
func bounded(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	suffix := fmt.Sprintf(" ... (%d more characters)", len(s))
	cut := maxMessage - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" ... (%d more characters)", len(s)-cut)
}

// boundStatus keeps every free-text field of the status within the CRD's
// limits, whatever went into it (node names, probe pairs, TigeraStatus
// messages), so that the status can always be written.
func boundStatus(st *v1alpha1.WindowsReadinessStatus) {
	st.Message = bounded(st.Message)
	for i := range st.Conditions {
		st.Conditions[i].Message = bounded(st.Conditions[i].Message)
	}
	for i := range st.Steps {
		st.Steps[i].Message = bounded(st.Steps[i].Message)
	}
}

// eventNote formats an Event's note within events.k8s.io/v1's limit: probe,
// migration and conflict notes name nodes, pairs and fields, and an Event
// whose note is too long is refused and never seen.
func eventNote(note string, args ...any) string {
	return bounded(sprintf(note, args...))
}

// sprintf formats a message; a message without arguments is taken as it is.
func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
