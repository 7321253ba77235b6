package openai

import (
	"strconv"
	"time"

	"github.com/vajra-go/vajra/codegen"
)

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string
	Created int64 // unix seconds
	OwnedBy string
	// DisplayName defaults to ID.
	DisplayName string
	// MaxModelLen is the context length (vLLM's max_model_len); 0 omits it.
	MaxModelLen int
	// Root is the model the ID serves (vLLM's root); empty omits it.
	Root string
	// Meta is llama-server's "meta" of the model; nil omits it.
	Meta *ModelMeta
}

// ModelMeta is llama-server's "meta" of a model in GET /v1/models.
type ModelMeta struct {
	VocabType, NVocab, NCtxTrain, NEmbd int
	NParams, Size                       uint64
}

// AppendModelList appends the body of GET /v1/models, one shape accepted by
// both the OpenAI and the Anthropic SDKs (WIRE.md, Models):
//
//	{"object":"list","data":[...],"has_more":false,"first_id":…,"last_id":…}
//
// first_id and last_id are null when models is empty.
func AppendModelList(dst []byte, models []Model) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i := range models {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendModel(dst, &models[i])
	}
	dst = append(dst, `],"has_more":false,"first_id":`...)
	if len(models) == 0 {
		return append(dst, `null,"last_id":null}`...)
	}
	dst = codegen.AppendJSONStringS(dst, models[0].ID)
	dst = append(dst, `,"last_id":`...)
	dst = codegen.AppendJSONStringS(dst, models[len(models)-1].ID)
	return append(dst, '}')
}

// AppendModel appends one model object (also the body of GET
// /v1/models/{id}): OpenAI's fields (id, object, created as unix seconds,
// owned_by), Anthropic's (type, display_name, created_at as RFC 3339, which
// anthropic-sdk-go decodes into a time.Time) and vLLM's (max_model_len, root).
func AppendModel(dst []byte, m *Model) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, m.ID)
	dst = append(dst, `,"object":"model","created":`...)
	dst = codegen.AppendInt(dst, m.Created)
	dst = append(dst, `,"owned_by":`...)
	dst = codegen.AppendJSONStringS(dst, orDefault(m.OwnedBy, "vajra"))
	dst = append(dst, `,"type":"model","display_name":`...)
	dst = codegen.AppendJSONStringS(dst, orDefault(m.DisplayName, m.ID))
	dst = append(dst, `,"created_at":"`...)
	dst = time.Unix(m.Created, 0).UTC().AppendFormat(dst, time.RFC3339)
	dst = append(dst, '"')
	if m.Root != "" {
		dst = append(dst, `,"root":`...)
		dst = codegen.AppendJSONStringS(dst, m.Root)
	}
	if m.MaxModelLen > 0 {
		dst = append(dst, `,"max_model_len":`...)
		dst = codegen.AppendInt(dst, int64(m.MaxModelLen))
	}
	if mm := m.Meta; mm != nil {
		dst = append(dst, `,"meta":{"vocab_type":`...)
		dst = codegen.AppendInt(dst, int64(mm.VocabType))
		dst = append(dst, `,"n_vocab":`...)
		dst = codegen.AppendInt(dst, int64(mm.NVocab))
		dst = append(dst, `,"n_ctx_train":`...)
		dst = codegen.AppendInt(dst, int64(mm.NCtxTrain))
		dst = append(dst, `,"n_embd":`...)
		dst = codegen.AppendInt(dst, int64(mm.NEmbd))
		dst = append(dst, `,"n_params":`...)
		dst = strconv.AppendUint(dst, mm.NParams, 10)
		dst = append(dst, `,"size":`...)
		dst = strconv.AppendUint(dst, mm.Size, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
