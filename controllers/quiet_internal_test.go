package controllers

import (
	"testing"
	"time"
)

func TestActivityWaitsForTheOperatorToRest(t *testing.T) {
	var a activity
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quiet := 3 * time.Second
	if got := a.wait("1/1", start, quiet); got != quiet {
		t.Fatalf("a write just seen: wait %s, want %s", got, quiet)
	}
	if got := a.wait("1/1", start.Add(2*time.Second), quiet); got != time.Second {
		t.Fatalf("two quiet seconds: wait %s, want 1s", got)
	}
	if got := a.wait("1/2", start.Add(2500*time.Millisecond), quiet); got != quiet {
		t.Fatalf("another write starts the quiet time again: wait %s", got)
	}
	if got := a.wait("1/2", start.Add(5500*time.Millisecond), quiet); got != 0 {
		t.Fatalf("quiet for 3s: wait %s, want none", got)
	}
}

func TestActivityGivesUpOnAnOperatorThatNeverRests(t *testing.T) {
	var a activity
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 59 {
		now := start.Add(time.Duration(i) * time.Second)
		if got := a.wait(now.String(), now, 3*time.Second); got == 0 {
			t.Fatalf("gave up after %s", now.Sub(start))
		}
	}
	now := start.Add(quietWaitMax)
	if got := a.wait(now.String(), now, 3*time.Second); got != 0 {
		t.Fatalf("still waiting after %s: %s", quietWaitMax, got)
	}
}
