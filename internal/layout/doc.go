// Package layout holds no code: its tests check the rules that keep
// headroom's seams (README.md, "How it works"), by parsing every non-test Go
// file of the module, whatever its build tags.
//
// Terms:
//   - Import rules: which packages may import which, directly or not
//     (compile knows no device, models no planner, reports no trainer, only
//     cmd/ the CLI).
//   - Device code: a non-test file that imports purego (which loads a
//     device's libraries at run time) or backend/cuda, or that is built only
//     with or only without the tag cuda. It lives only under backend/;
//     cmd/, internal/cli and the hardware check (bench/gpucheck) may
//     import backend/cuda to wire it.
package layout
