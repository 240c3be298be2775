package round

import (
	"unicode/utf8"

	"github.com/winready/winready/api/v1alpha1"
)

// Truncate cuts s to at most n bytes, on a character boundary, ending in
// " ..." when it cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(" ..."), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " ..."
}

// Listed counts what a round found and keeps the first v1alpha1.MaxListed
// for the status, so that it stays small however large the cluster: label
// builds an entry only for those kept.
type Listed[T any] struct {
	Count int
	First []T
}

// Add counts one more and keeps it while there is room.
func (l *Listed[T]) Add(label func() T) {
	l.Count++
	if len(l.First) < v1alpha1.MaxListed {
		l.First = append(l.First, label())
	}
}

// FirstListed is at most the first v1alpha1.MaxListed of items.
func FirstListed[T any](items []T) []T { return items[:min(len(items), v1alpha1.MaxListed)] }
