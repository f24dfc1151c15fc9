module github.com/evalmeter/evalmeter/internal/jsonindex/_asm

go 1.26.8

require (
	github.com/evalmeter/evalmeter v0.0.0
	github.com/mmcloughlin/avo v0.5.0
)

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

replace github.com/evalmeter/evalmeter => ../../..
