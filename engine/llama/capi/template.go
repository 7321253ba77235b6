package capi

/*
#include "wrappers.h"
*/
import "C"

import "unsafe"

// NamedChatTemplate returns the model's chat template of that name
// (tokenizer.chat_template.<name>, such as "tool_use"), or "".
func (m *Model) NamedChatTemplate(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	s := C.vjw_llama_model_chat_template(m.p, cs)
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// Size is the bytes of the model's tensors (llama_model_size).
func (m *Model) Size() uint64 { return uint64(C.vjw_llama_model_size(m.p)) }

// VocabType is llama.cpp's vocabulary type (llama_vocab_type: 1 SPM,
// 2 BPE, 3 WPM, ...).
func (m *Model) VocabType() int { return int(C.vjw_llama_vocab_type(m.vocab)) }
