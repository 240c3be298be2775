package e2e

import (
	"fmt"
	"os"
)

// kwokAnnotation marks the nodes kwok plays.
const kwokAnnotation = "kwok.x-k8s.io/node"

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// skipProbe: the probe agents need a real node network; kwok's nodes have
// none, and the simulator's agents answer only in the simulator backend.
func skipProbe() bool { return os.Getenv("E2E_BACKEND") == "real" }
