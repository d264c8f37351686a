// Package testutil holds the helpers headroom's tests share: closeness checks
// for floating-point results (AllClose, RequireClose, RelErr), the
// central-difference gradient that every differentiable op is checked
// against (NumericGrad), golden files under testdata/ rewritten with -update
// (Golden), and deterministic random inputs (RandFloats).
//
// Terms:
//   - rtol, atol: relative and absolute tolerance, combined as NumPy's
//     isclose: |got - want| <= atol + rtol·|want|.
//   - Golden file: the expected output of a test, stored as text in the
//     package's testdata/ directory and reviewed like code. `go test -update`
//     rewrites the files from the current output.
//
// testutil is imported only by tests. It defines the -update flag, so a test
// binary that imports it must not define another flag named "update".
package testutil
