package integration_test

// The worker protocols the tests serve through: a program links them by
// importing their packages, as cmd/vajra does (the module root links none).
import (
	_ "github.com/vajra-go/vajra/engine/remote/llamaserver" // registers llama-server://
	_ "github.com/vajra-go/vajra/engine/remote/sglang"      // registers sglang://
	_ "github.com/vajra-go/vajra/engine/remote/vllm"        // registers vllm://
)
