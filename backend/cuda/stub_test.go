//go:build !cuda

package cuda

import (
	"errors"
	"strings"
	"testing"
)

// Without the tag, every entry point fails with ErrNotBuilt and no CUDA
// library is loaded.
func TestBuiltWithoutTag(t *testing.T) {
	if Built {
		t.Fatal("Built: got true in a build without -tags cuda")
	}
	_, errDevice := Device(0)
	_, errOpen := Open(0)
	_, errCount := DeviceCount()
	_, errVersion := DriverVersion()
	for name, err := range map[string]error{"Device": errDevice, "Open": errOpen, "DeviceCount": errCount, "DriverVersion": errVersion} {
		if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "built without -tags cuda") {
			t.Errorf("%s: got %v, want ErrNotBuilt (built without -tags cuda)", name, err)
		}
	}
}
