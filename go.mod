module github.com/headroom-ml/headroom

go 1.26.0

require (
	github.com/ebitengine/purego v0.11.3
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	github.com/mmcloughlin/avo v0.5.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/x448/float16 v0.8.4
	golang.org/x/sys v0.49.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/mod v0.6.0 // indirect
	golang.org/x/term v0.44.0 // indirect
	golang.org/x/tools v0.2.0 // indirect
)
