package llama

import (
	"os"
	"strings"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
)

var _ engine.Describer = (*Engine)(nil)

// ModelInfo implements engine.Describer: the model file and llama.cpp's
// figures of it, for GET /v1/models' meta and GET /props.
func (e *Engine) ModelInfo() engine.ModelInfo {
	m := e.model
	info := engine.ModelInfo{
		Path:      e.cfg.ModelPath,
		VocabType: m.VocabType(),
		NVocab:    e.vocabN,
		NCtxTrain: m.TrainContext(),
		NEmbd:     m.EmbedDim(),
		NParams:   m.Params(),
		Size:      m.Size(),
		NCtx:      e.cfg.MaxModelLen,
		Slots:     e.cfg.MaxNumSeqs,
		BOSToken:  e.bos,
		BuildInfo: "llama.cpp " + capi.Version(),
	}
	if t := m.EOS(); t >= 0 && int(t) < e.vocabN {
		info.EOSToken = string(m.Piece(nil, t, true))
	}
	switch src := e.cfg.ChatTemplate; {
	case src != "" && !strings.Contains(src, "{"):
		if b, err := os.ReadFile(src); err == nil {
			info.ChatTemplate = string(b)
		}
	case src != "":
		info.ChatTemplate = src
	default:
		info.ChatTemplate = m.ChatTemplate()
	}
	return info
}
