// Command grpcgen generates the Go code of the vLLM and SGLang worker
// protocols (engine/remote/commonpb, engine/remote/vllm/vllmpb,
// engine/remote/sglang/sglangpb) from the .proto files of one pinned
// release of smg-grpc-proto, which fetch-protos.sh brings into .proto/ at
// the module root. It compiles them with a pure-Go compiler
// (github.com/bufbuild/protocompile) and feeds the result to the pinned
// plugins protoc-gen-go and protoc-gen-go-grpc (`go tool`, go.mod's tool
// directives), as protoc would: no protoc binary, no Python beyond the
// fetch. The protos carry no go_package, so the import paths come from M
// mappings. `make generate` runs it; `make check-generate` fails when the
// committed code differs from what it writes.
package main

//go:generate bash fetch-protos.sh ../../../../.proto/smg-grpc-proto
//go:generate go run . -root ../../../.. -protos ../../../../.proto/smg-grpc-proto

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

const module = "github.com/vajra-go/vajra"

// dir is the folder the files are registered under (see run).
const dir = "smg_grpc_proto/"

// files maps each generated .proto to its Go package (import path).
var files = []struct{ proto, pkg string }{
	{"common.proto", module + "/engine/remote/commonpb"},
	{"vllm_engine.proto", module + "/engine/remote/vllm/vllmpb"},
	{"sglang_scheduler.proto", module + "/engine/remote/sglang/sglangpb"},
}

func main() {
	root := flag.String("root", ".", "the module root, where the generated files go")
	protos := flag.String("protos", ".proto/smg-grpc-proto", "the folder of the .proto files")
	flag.Parse()
	if err := run(*root, *protos); err != nil {
		fmt.Fprintln(os.Stderr, "grpcgen:", err)
		os.Exit(1)
	}
}

func run(root, protos string) error {
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protos}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	names := make([]string, len(files))
	params := []string{"module=" + module}
	for i, f := range files {
		names[i] = f.proto
		params = append(params, "M"+dir+f.proto+"="+f.pkg)
	}
	compiled, err := c.Compile(context.Background(), names...)
	if err != nil {
		return err
	}
	// Every file with its imports before it, as protoc sends them.
	var all []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imps := fd.Imports()
		for i := 0; i < imps.Len(); i++ {
			add(imps.Get(i).FileDescriptor)
		}
		all = append(all, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range compiled {
		add(fd)
	}
	// The files register in the process-wide registry under their path, and
	// "common.proto" is a name any other library may take too: they go
	// under the wheel's own folder name instead, imports alike (the wire
	// does not see paths).
	rename := map[string]string{}
	for i, n := range names {
		rename[n] = dir + n
		names[i] = dir + n
	}
	for _, fd := range all {
		if n, ok := rename[fd.GetName()]; ok {
			fd.Name = proto.String(n)
		}
		for i, d := range fd.Dependency {
			if n, ok := rename[d]; ok {
				fd.Dependency[i] = n
			}
		}
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: names,
		Parameter:      proto.String(strings.Join(params, ",")),
		ProtoFile:      all,
	}
	for _, plugin := range []string{"protoc-gen-go", "protoc-gen-go-grpc"} {
		if err := generate(root, plugin, req); err != nil {
			return fmt.Errorf("%s: %w", plugin, err)
		}
	}
	return nil
}

// generate runs one plugin on req and writes the files it returns under root.
func generate(root, plugin string, req *pluginpb.CodeGeneratorRequest) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "tool", plugin)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("%s", resp.GetError())
	}
	for _, f := range resp.File {
		p := filepath.Join(root, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
