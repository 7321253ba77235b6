// Package tokens is the deterministic token source shared by the benchmark's
// reference servers (bench/floor and bench/baseline), so that both emit the
// same text for the same request and a client sees identical streams.
package tokens

// words is the fixed list cycled by Text. Each entry is one "token" as a
// tokenizer would commonly see it: a short English word with its leading
// space. None needs JSON escaping, so the floor server can pre-bake frames
// by plain concatenation.
var words = [...]string{
	" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy",
	" dog", " while", " a", " small", " bird", " sings", " in", " green",
	" trees", " near", " an", " old", " stone", " wall", " and", " cold",
	" water", " runs", " down", " from", " high", " hills", " to", " sea",
}

// Len is the cycle length of the token source.
const Len = len(words)

// Text returns the text of the i-th token of a stream (i from 0). Safe for
// concurrent use; the returned string is a constant.
func Text(i int) string {
	if i < 0 {
		i = -i
	}
	return words[i%Len]
}

// DefaultCount is the number of tokens the reference servers generate when
// neither their -tokens flag nor the request's max_tokens says otherwise.
const DefaultCount = 128

// PromptTokens estimates the prompt length, in tokens, of a request body of
// n bytes, for the usage block of the reference servers: about one token per
// four bytes of JSON, as a cheap stand-in for a tokenizer.
func PromptTokens(bodyLen int) int {
	return bodyLen / 4
}
