//go:build !linux

package probe

import "errors"

// The node agent runs on Linux nodes only; elsewhere only the responder runs.
func openCapture() (receiver, error) {
	return nil, errors.New("capturing UDP 4789 is supported on Linux only")
}
