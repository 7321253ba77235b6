"""Decodes EngineCoreRequest messages as vLLM's engine core does
(vllm.v1.serial_utils.MsgpackDecoder, the vLLM of .vllm) and prints what
it read of each, one JSON object per file given: the golden side of
v032's TestRequestsDecodedByVLLM."""

import json
import sys

from vllm.v1.engine import EngineCoreRequest
from vllm.v1.serial_utils import MsgpackDecoder

dec = MsgpackDecoder(EngineCoreRequest)
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        r = dec.decode(f.read())
    sp = r.sampling_params
    so = sp.structured_outputs
    print(json.dumps({
        "request_id": r.request_id,
        "prompt_token_ids": r.prompt_token_ids,
        "arrival_time": r.arrival_time,
        "cache_salt": r.cache_salt,
        "data_parallel_rank": r.data_parallel_rank,
        "client_index": r.client_index,
        "current_wave": r.current_wave,
        "priority": r.priority,
        "external_req_id": r.external_req_id,
        "abort_immediately": r.abort_immediately,
        "session_id": r.session_id,
        "n": sp.n,
        "presence_penalty": sp.presence_penalty,
        "frequency_penalty": sp.frequency_penalty,
        "repetition_penalty": sp.repetition_penalty,
        "temperature": sp.temperature,
        "top_p": sp.top_p,
        "top_k": sp.top_k,
        "min_p": sp.min_p,
        "seed": sp.seed,
        "stop_token_ids": sp.stop_token_ids,
        "ignore_eos": sp.ignore_eos,
        "max_tokens": sp.max_tokens,
        "min_tokens": sp.min_tokens,
        "logprobs": sp.logprobs,
        "prompt_logprobs": sp.prompt_logprobs,
        "eos_token_id": sp.eos_token_id,
        "all_stop_token_ids": sorted(sp.all_stop_token_ids or []),
        "logit_bias": {str(k): v for k, v in (sp.logit_bias or {}).items()},
        "allowed_token_ids": sp.allowed_token_ids,
        "bad_words_token_ids": sp.bad_words_token_ids,
        "skip_reading_prefix_cache": sp.skip_reading_prefix_cache,
        "extra_args": sp.extra_args,
        "structured_outputs": None if so is None else {
            "json": so.json, "regex": so.regex, "choice": so.choice, "grammar": so.grammar,
            "json_object": so.json_object, "structural_tag": so.structural_tag, "backend": so._backend,
        },
    }))
