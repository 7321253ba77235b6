package llama

import (
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
)

// samplerParams maps a request's sampling settings to llama.cpp's, for the
// seeds and context of this engine.
func (e *Engine) samplerParams(sp *engine.Sampling, grammar string) capi.SamplerParams {
	p := capi.SamplerParams{
		Temperature:      float32(sp.Temperature),
		TopK:             sp.TopK,
		TopP:             float32(sp.TopP),
		MinP:             float32(sp.MinP),
		RepeatPenalty:    float32(sp.RepetitionPenalty),
		FrequencyPenalty: float32(sp.FrequencyPenalty),
		PresencePenalty:  float32(sp.PresencePenalty),
		PenaltyLastN:     e.cfg.MaxModelLen,
		Grammar:          grammar,
	}
	if len(sp.LogitBias) > 0 {
		p.LogitBias = make([]capi.LogitBias, len(sp.LogitBias))
		for i, b := range sp.LogitBias {
			p.LogitBias[i] = capi.LogitBias{Token: capi.Token(b.TokenID), Bias: float32(b.Bias)}
		}
	}
	if sp.MinTokens > 0 {
		// vLLM's min_tokens bans its all_stop_token_ids: the stop token
		// ids, and the end-of-generation tokens unless ignore_eos.
		for _, id := range sp.StopTokenIDs {
			p.Ban = append(p.Ban, capi.Token(id))
		}
		if !sp.IgnoreEOS {
			for t, eog := range e.eog {
				if eog {
					p.Ban = append(p.Ban, capi.Token(t))
				}
			}
		}
	}
	return p
}
