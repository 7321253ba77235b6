package engine

// SamplingField names a Sampling field that a model's generation
// defaults may set.
type SamplingField uint16

const (
	FieldTemperature SamplingField = 1 << iota
	FieldTopP
	FieldTopK
	FieldMinP
	FieldRepetitionPenalty
	FieldPresencePenalty
	FieldFrequencyPenalty
	// FieldMaxTokens: no maximum given (MaxTokens 0); the model's
	// max_new_tokens caps it (pipeline.Limits.DefaultMaxTokens).
	FieldMaxTokens

	// AllSamplingFields are every SamplingField.
	AllSamplingFields = FieldMaxTokens<<1 - 1
)

// SamplingDefaults are a model's recommended sampling parameters, which
// a request takes for the fields it leaves out (Sampling.Unset): what
// vLLM does with generation_config.json under --generation-config auto,
// its default. The zero value sets nothing.
type SamplingDefaults struct {
	// Set says which of the fields below hold a default.
	Set                               SamplingField
	Temperature, TopP, MinP           float64
	RepetitionPenalty                 float64
	PresencePenalty, FrequencyPenalty float64
	TopK                              int // 0 = off
	// MaxTokens caps a choice that gives no maximum (FieldMaxTokens
	// unset: chat without max_tokens) below the room the context leaves
	// (pipeline.Limits.DefaultMaxTokens); 0 = no cap.
	MaxTokens int
}

// Apply sets each field s leaves unset to its default.
func (d *SamplingDefaults) Apply(s *Sampling) {
	use := d.Set & s.Unset
	if use == 0 {
		return
	}
	if use&FieldTemperature != 0 {
		s.Temperature = d.Temperature
	}
	if use&FieldTopP != 0 {
		s.TopP = d.TopP
	}
	if use&FieldTopK != 0 {
		s.TopK = d.TopK
	}
	if use&FieldMinP != 0 {
		s.MinP = d.MinP
	}
	if use&FieldRepetitionPenalty != 0 {
		s.RepetitionPenalty = d.RepetitionPenalty
	}
	if use&FieldPresencePenalty != 0 {
		s.PresencePenalty = d.PresencePenalty
	}
	if use&FieldFrequencyPenalty != 0 {
		s.FrequencyPenalty = d.FrequencyPenalty
	}
}

// SamplingDefaultsFrom makes SamplingDefaults of generation_config.json's
// sampling parameters by name (tokenizer.GenerationSampling), as vLLM
// reads them: max_new_tokens is max_tokens, a top_k of -1 is off.
func SamplingDefaultsFrom(g map[string]float64) SamplingDefaults {
	var d SamplingDefaults
	for k, v := range g {
		switch k {
		case "temperature":
			d.Set, d.Temperature = d.Set|FieldTemperature, v
		case "top_p":
			d.Set, d.TopP = d.Set|FieldTopP, v
		case "top_k":
			d.Set, d.TopK = d.Set|FieldTopK, max(int(v), 0)
		case "min_p":
			d.Set, d.MinP = d.Set|FieldMinP, v
		case "repetition_penalty":
			d.Set, d.RepetitionPenalty = d.Set|FieldRepetitionPenalty, v
		case "presence_penalty":
			d.Set, d.PresencePenalty = d.Set|FieldPresencePenalty, v
		case "frequency_penalty":
			d.Set, d.FrequencyPenalty = d.Set|FieldFrequencyPenalty, v
		case "max_new_tokens":
			if v >= 1 {
				d.MaxTokens = int(v)
			}
		}
	}
	return d
}
