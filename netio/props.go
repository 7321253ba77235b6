package netio

import (
	"strconv"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/httpparse"
)

// What an engine says of its model (engine.Describer, the llama.cpp
// engine's): the model file as root, and llama-server's "meta", in GET
// /v1/models; GET /props in llama-server's shape. Both bodies are
// rendered once, at New: they change only with the configuration.

// describeModel sets m's root and meta from eng, when eng describes its
// model; m is left alone otherwise (the simulated engine).
func describeModel(m *openai.Model, eng engine.Engine) {
	d, ok := engine.As[engine.Describer](eng)
	if !ok {
		return
	}
	info := d.ModelInfo()
	if info.Path != "" {
		m.Root = info.Path
	}
	m.Meta = &openai.ModelMeta{VocabType: info.VocabType, NVocab: info.NVocab, NCtxTrain: info.NCtxTrain,
		NEmbd: info.NEmbd, NParams: info.NParams, Size: info.Size}
}

// renderProps renders GET /props, llama-server's fields that a client
// reads (default_generation_settings.n_ctx, total_slots, model_path,
// model_alias, modalities, chat_template, bos_token, eos_token,
// build_info), or nil when eng does not describe its model.
func renderProps(eng engine.Engine, models []string) []byte {
	d, ok := engine.As[engine.Describer](eng)
	if !ok {
		return nil
	}
	info := d.ModelInfo()
	b := append([]byte(nil), `{"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":`...)
	b = strconv.AppendInt(b, int64(info.NCtx), 10)
	b = append(b, `,"speculative":false,"is_processing":false},"total_slots":`...)
	b = strconv.AppendInt(b, int64(info.Slots), 10)
	b = append(b, `,"model_alias":`...)
	alias := ""
	if len(models) > 0 {
		alias = models[0]
	}
	b = codegen.AppendJSONStringS(b, alias)
	b = append(b, `,"model_path":`...)
	b = codegen.AppendJSONStringS(b, info.Path)
	b = append(b, `,"modalities":{"vision":false,"audio":false},"chat_template":`...)
	b = codegen.AppendJSONStringS(b, info.ChatTemplate)
	b = append(b, `,"bos_token":`...)
	b = codegen.AppendJSONStringS(b, info.BOSToken)
	b = append(b, `,"eos_token":`...)
	b = codegen.AppendJSONStringS(b, info.EOSToken)
	b = append(b, `,"build_info":`...)
	b = codegen.AppendJSONStringS(b, info.BuildInfo)
	return append(b, '}')
}

// handleProps answers GET /props: the rendered body, or 404 from an
// engine that does not describe its model.
func (s *Server) handleProps(dst []byte, req *httpparse.Request) []byte {
	if s.propsBody == nil {
		return appendErrorResponse(dst, req.Minor, 404, dialectOpenAI, "not_found", "This engine does not describe its model (GET /props is the llama.cpp engine's).", !req.KeepAlive)
	}
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.propsBody, !req.KeepAlive)
}
