package engine

import "testing"

// TestSamplingDefaultsFrom: generation_config.json's sampling parameters
// as vLLM reads them (max_new_tokens is a cap, top_k -1 is off), applied
// only to the fields a request did not give.
func TestSamplingDefaultsFrom(t *testing.T) {
	d := SamplingDefaultsFrom(map[string]float64{"temperature": 0.7, "top_k": -1, "presence_penalty": 0.5,
		"frequency_penalty": 0.25, "min_p": 0.05, "max_new_tokens": 64})
	want := FieldTemperature | FieldTopK | FieldPresencePenalty | FieldFrequencyPenalty | FieldMinP
	if d.Set != want || d.TopK != 0 || d.MaxTokens != 64 {
		t.Fatalf("%+v", d)
	}
	s := Sampling{Temperature: 0, TopK: 5, Unset: AllSamplingFields &^ FieldTemperature}
	d.Apply(&s)
	if s.Temperature != 0 || s.TopK != 0 || s.PresencePenalty != 0.5 || s.FrequencyPenalty != 0.25 || s.MinP != 0.05 || s.TopP != 0 || s.MaxTokens != 0 {
		t.Fatalf("applied: %+v", s)
	}
	var none SamplingDefaults
	s = Sampling{Temperature: 1}
	none.Apply(&s)
	if s.Temperature != 1 {
		t.Fatal("the zero defaults changed a request")
	}
}
