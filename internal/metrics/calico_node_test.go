package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRecordCalicoNodeIgnoredSaysWhoSetIt(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		ignored, ours           bool
		wantWinready, wantOther float64
	}{
		{"not ignored", false, false, 0, 0},
		{"winready's hold", true, true, 1, 0},
		{"someone else's", true, false, 0, 1},
	} {
		RecordCalicoNodeIgnored(tc.ignored, tc.ours)
		if got := testutil.ToFloat64(calicoNodeIgnored.WithLabelValues("winready")); got != tc.wantWinready {
			t.Errorf("%s: set_by=winready is %v, want %v", tc.name, got, tc.wantWinready)
		}
		if got := testutil.ToFloat64(calicoNodeIgnored.WithLabelValues("other")); got != tc.wantOther {
			t.Errorf("%s: set_by=other is %v, want %v", tc.name, got, tc.wantOther)
		}
	}
}
