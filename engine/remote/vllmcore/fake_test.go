package vllmcore

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
)

// fakeEngine is an engine core written in Go: it runs the engine's side
// of the handshake as vLLM's does (DEALER to the handshake address, HELLO,
// the addresses, a DEALER and a PUSH there, the registration, READY) and
// then lets the test read requests and write outputs.
type fakeEngine struct {
	t    testing.TB
	rank int
	hs   *zmtp.Conn
	in   *zmtp.Conn
	out  *zmtp.Conn
}

type fakeOpts struct {
	version string
	rank    int
}

func dialZMTP(t testing.TB, endpoint, sockType string, identity []byte) *zmtp.Conn {
	t.Helper()
	network, addr, err := zmtp.Split(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := zmtp.Client(nc, sockType, identity, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mapMsg(kv ...any) []byte {
	b := msgp.AppendMapHeader(nil, uint32(len(kv)/2))
	for i := 0; i < len(kv); i += 2 {
		b = msgp.AppendString(b, kv[i].(string))
		var err error
		if b, err = msgp.AppendIntf(b, kv[i+1]); err != nil {
			panic(err)
		}
	}
	return b
}

// startFake attaches a fake engine to the Frontend at addr.
func startFake(t testing.TB, addr string, o fakeOpts) *fakeEngine {
	t.Helper()
	if o.version == "" {
		o.version = "0.32.0"
	}
	id := binary.LittleEndian.AppendUint16(nil, uint16(o.rank))
	fe := &fakeEngine{t: t, rank: o.rank}
	fe.hs = dialZMTP(t, "tcp://"+addr, "DEALER", id)
	if err := fe.hs.WriteMsg(mapMsg("status", "HELLO", "local", true, "headless", true)); err != nil {
		t.Fatal(err)
	}
	frames, err := fe.hs.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	in, out := initAddresses(t, frames[0])
	fe.connect(in, out, o)
	if err := fe.hs.WriteMsg(mapMsg("status", "READY", "local", true, "headless", true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fe.kill)
	return fe
}

// connect dials the request and output addresses and registers.
func (fe *fakeEngine) connect(in, out string, o fakeOpts) {
	t := fe.t
	t.Helper()
	id := binary.LittleEndian.AppendUint16(nil, uint16(o.rank))
	fe.in = dialZMTP(t, in, "DEALER", id)
	fe.out = dialZMTP(t, out, "PUSH", nil)
	reg := mapMsg("max_model_len", 2048, "num_gpu_blocks", 100, "block_size", 16, "dtype", "float32",
		"vllm_version", o.version, "data_parallel_rank", o.rank, "data_parallel_size", 1, "max_num_seqs", 8)
	if err := fe.in.WriteMsg(reg); err != nil {
		t.Fatal(err)
	}
}

// initAddresses reads the front end's answer to HELLO.
func initAddresses(t testing.TB, b []byte) (in, out string) {
	t.Helper()
	v, _, err := msgp.ReadIntfBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	a := m["addresses"].(map[string]any)
	return a["inputs"].([]any)[0].(string), a["outputs"].([]any)[0].(string)
}

// kill drops every connection, as a SIGKILL does.
func (fe *fakeEngine) kill() {
	if fe.hs != nil {
		fe.hs.Close()
	}
	fe.in.Close()
	fe.out.Close()
}

// request reads the next request message: its type and payload.
func (fe *fakeEngine) request() (byte, any) {
	fe.t.Helper()
	frames, err := fe.in.ReadMsg()
	if err != nil {
		fe.t.Fatalf("fake engine: %v", err)
	}
	if len(frames) < 2 || len(frames[0]) != 1 {
		fe.t.Fatalf("fake engine: request of %d frames", len(frames))
	}
	v, _, err := msgp.ReadIntfBytes(frames[1])
	if err != nil {
		fe.t.Fatalf("fake engine: %v", err)
	}
	return frames[0][0], v
}

// send writes one EngineCoreOutputs.
func (fe *fakeEngine) send(m *v032.OutputsMsg) {
	fe.t.Helper()
	m.EngineIndex = fe.rank
	b, aux := v032.AppendOutputs(nil, nil, m)
	if err := fe.out.WriteMsg(append([][]byte{b}, aux...)...); err != nil {
		fe.t.Fatalf("fake engine: %v", err)
	}
}
