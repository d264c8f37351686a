package ptx

import "fmt"

// Arch is what a PTX module is written for: the target (.target sm_SM)
// and the PTX ISA version (.version Version/10.Version%10).
type Arch struct {
	SM      int // 80 for sm_80
	Version int // the ISA version times ten: 78 for 7.8
}

// Target returns the .target name, e.g. "sm_90".
func (a Arch) Target() string { return fmt.Sprintf("sm_%d", a.SM) }

func (a Arch) String() string {
	return fmt.Sprintf("%s (PTX ISA %d.%d)", a.Target(), a.Version/10, a.Version%10)
}

// targetISA is the first PTX ISA version that names each target (the PTX
// ISA's "Target ISA notes"); the renderer writes that version, the oldest
// that can express the module, so that the oldest driver able to run the
// device can load it.
var targetISA = map[int]int{60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70, 86: 71, 87: 74, 89: 78, 90: 78}

// driverISA returns the newest PTX ISA version a driver of CUDA version
// driver (cuDriverGetVersion: 1000·major + 10·minor) JIT-compiles, or 0
// for a driver older than CUDA 11.0 (the release notes of each CUDA
// version state its PTX ISA).
func driverISA(driver int) int {
	major, minor := driver/1000, driver%1000/10
	switch {
	case major < 11:
		return 0
	case major == 11:
		return 70 + min(minor, 8)
	case major == 12:
		return [...]int{80, 81, 82, 83, 84, 85, 85, 86, 87, 88}[min(minor, 9)]
	}
	return 90 + (major-13)*10 + minor // CUDA 13.0: 9.0
}

// MinDriver is the oldest CUDA driver version (1000·major + 10·minor) the
// renderer writes for: 11.0, the first with sm_80.
const MinDriver = 11000

// ArchFor returns what to write for a device of compute capability
// major.minor run by a driver of CUDA version driver
// (cuDriverGetVersion): the device's own target when the table knows it,
// else the newest known target below it (PTX is compiled by the driver
// for any device of that capability or later), with the oldest PTX ISA
// version that names the target. The kernels use nothing beyond sm_60's
// instructions (integer bit work for bfloat16, f64 arithmetic for exp and
// log), so every target from 6.0 on is written the same way. It fails
// for a device before 6.0 or a driver whose JIT cannot read that
// version, saying which.
func ArchFor(driver, major, minor int) (Arch, error) {
	cc := major*10 + minor
	if cc < 60 {
		return Arch{}, fmt.Errorf("ptx: compute capability %d.%d is below 6.0, the oldest the kernels are written for", major, minor)
	}
	sm := 0
	for t := range targetISA {
		if t <= cc && t > sm && (t/10 == major || t%10 == 0) {
			sm = t
		}
	}
	a := Arch{SM: sm, Version: targetISA[sm]}
	if have := driverISA(driver); have < a.Version {
		return Arch{}, fmt.Errorf("ptx: the driver (CUDA %d.%d) reads PTX ISA up to %d.%d; %s needs %d.%d: update the NVIDIA driver",
			driver/1000, driver%1000/10, have/10, have%10, a.Target(), a.Version/10, a.Version%10)
	}
	return a, nil
}
