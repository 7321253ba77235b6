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
