"""gguf_f32.py: write a GGUF model's float32 twin, for a reference run.

Every quantized tensor is dequantized to float32 with llama.cpp's own
gguf-py (gguf.quants.dequantize: the exact values the quantized weights
stand for), float32 tensors are copied, float16 ones widened, and every
metadata key is carried over (general.file_type becomes 0, ALL_F32). The
twin holds the same model, computed without quantized kernels: run both
in llama-server to tell a quantized kernel's rounding from the model's
own answer (bench/RESULTS.md, "The France chat against float32").

    python3 -m venv /tmp/f32 && /tmp/f32/bin/pip install gguf==0.19.0 numpy
    /tmp/f32/bin/python bench/scripts/gguf_f32.py MODEL.gguf MODEL-f32.gguf
"""

import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType as VT, GGUFWriter


def main(src: str, dst: str) -> None:
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields["general.architecture"].contents())  # writes the architecture itself
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = 0 if key == "general.file_type" else f.contents()
        w.add_key_value(key, val, f.types[0], f.types[-1] if f.types[0] == VT.ARRAY else None)
    for t in r.tensors:
        shape = [int(x) for x in t.shape]  # ggml order: ne0 first
        if t.tensor_type == QT.F32:
            arr = np.array(t.data, dtype=np.float32)
        elif t.tensor_type == QT.F16:
            arr = np.array(t.data, dtype=np.float16).astype(np.float32)
        else:
            arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        arr = np.ascontiguousarray(arr.reshape(tuple(reversed(shape))))
        assert arr.size == int(np.prod(shape)), t.name
        w.add_tensor(t.name, arr, raw_dtype=QT.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_f32.py MODEL.gguf OUT-f32.gguf")
    main(sys.argv[1], sys.argv[2])
