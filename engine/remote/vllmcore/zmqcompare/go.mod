module github.com/vajra-go/vajra/engine/remote/vllmcore/zmqcompare

go 1.26.8

require (
	github.com/go-zeromq/zmq4 v0.17.0
	github.com/pebbe/zmq4 v1.4.0
	github.com/vajra-go/vajra v0.0.0
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/vajra-go/vajra => ../../../..
