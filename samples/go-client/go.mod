module github.com/caerus-dev/dls/samples/go-client

go 1.26.0

require (
	github.com/caerus-dev/dls/sdks/go v0.0.0
	google.golang.org/grpc v1.85.0
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The generated client lives in this repository; build against the checked-out copy.
replace github.com/caerus-dev/dls/sdks/go => ../../sdks/go
