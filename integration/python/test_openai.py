"""The openai Python SDK (3.x) against Vajra on the real model: what a user
checks (text, usage, ids that chain, error classes and codes)."""

import base64
import json
import struct
import time

import openai
import pytest

Q = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_chat(oai, model):
    r = oai.chat.completions.create(model=model, messages=Q, max_tokens=16, temperature=0)
    c = r.choices[0]
    assert r.id.startswith("chatcmpl-") and r.model == model
    assert c.message.role == "assistant" and c.message.content.strip()
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 16
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_chat_stream_equals_non_stream(oai, model):
    kw = dict(model=model, messages=Q, max_tokens=16, temperature=0)
    whole = oai.chat.completions.create(**kw)
    text, finish, usage = "", None, None
    with oai.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw) as s:
        for chunk in s:
            if chunk.usage:
                usage = chunk.usage
            for ch in chunk.choices:
                text += ch.delta.content or ""
                finish = ch.finish_reason or finish
    assert text == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_chat_return_token_ids(oai, model):
    # vLLM's return_token_ids, as RL trainers ask for it (extra_body): the
    # prompt's ids and the answer's, the same streamed (joined) and not,
    # as many as usage counts.
    kw = dict(model=model, messages=Q, max_tokens=16, temperature=0, extra_body={"return_token_ids": True})
    whole = oai.chat.completions.create(**kw)
    prompt_ids = whole.model_extra["prompt_token_ids"]
    ids = whole.choices[0].model_extra["token_ids"]
    assert len(prompt_ids) == whole.usage.prompt_tokens
    assert len(ids) == whole.usage.completion_tokens and all(isinstance(i, int) for i in ids)
    streamed, first = [], []
    with oai.chat.completions.create(stream=True, **kw) as s:
        for chunk in s:
            if chunk.model_extra.get("prompt_token_ids") is not None:
                first.append(chunk.model_extra["prompt_token_ids"])
            for ch in chunk.choices:
                streamed += ch.model_extra.get("token_ids") or []
    assert first == [prompt_ids]
    assert streamed == ids


def test_chat_n(oai, model):
    r = oai.chat.completions.create(model=model, messages=Q, max_tokens=8, n=2, temperature=1.0, seed=7)
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.message.content for c in r.choices)
    assert 2 <= r.usage.completion_tokens <= 16


def test_chat_logprobs(oai, model):
    r = oai.chat.completions.create(model=model, messages=Q, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
    c = r.choices[0]
    toks = c.logprobs.content
    assert len(toks) == r.usage.completion_tokens
    assert "".join(t.token for t in toks) == c.message.content
    for t in toks:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert t.top_logprobs[0].logprob == pytest.approx(t.logprob, abs=1e-4)


def test_chat_tools(oai, model):
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = oai.chat.completions.create(model=model, messages=msgs, tools=[WEATHER], tool_choice="required", max_tokens=48, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    args = json.loads(call.function.arguments)
    assert isinstance(args["city"], str) and args["city"]
    # The result goes back as a tool message; the model answers in text.
    msgs += [c.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "22 C and sunny"}]
    r2 = oai.chat.completions.create(model=model, messages=msgs, tools=[WEATHER], max_tokens=16, temperature=0)
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens


def test_chat_tools_stream(oai, model):
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    name, args, finish = "", "", None
    with oai.chat.completions.create(model=model, messages=msgs, tools=[WEATHER], tool_choice="required",
                                     max_tokens=48, temperature=0, stream=True) as s:
        for chunk in s:
            for ch in chunk.choices:
                for tc in ch.delta.tool_calls or []:
                    name += (tc.function.name or "") if tc.function else ""
                    args += (tc.function.arguments or "") if tc.function else ""
                finish = ch.finish_reason or finish
    assert name == "get_weather" and finish == "tool_calls"
    assert json.loads(args)["city"]


def test_completions(oai, model):
    r = oai.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=2)
    c = r.choices[0]
    assert c.text.strip() and c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == 5 and r.usage.completion_tokens == len(c.logprobs.tokens)
    assert "".join(c.logprobs.tokens) == c.text
    streamed = "".join(ch.choices[0].text for ch in oai.completions.create(
        model=model, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True))
    assert streamed == c.text


def test_completions_batch(oai, model):
    r = oai.completions.create(model=model, prompt=["One, two,", "Monday, Tuesday,"], max_tokens=4, temperature=0)
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert all(c.text for c in r.choices)


def test_responses(oai, model):
    r = oai.responses.create(model=model, input="Name a colour.", max_output_tokens=16, temperature=0)
    assert r.id.startswith("resp_") and r.status in ("completed", "incomplete")
    assert r.output_text.strip()
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 16
    got = oai.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text
    # previous_response_id: the second turn's prompt holds the first.
    r2 = oai.responses.create(model=model, input="And another one?", previous_response_id=r.id, max_output_tokens=16, temperature=0)
    assert r2.previous_response_id == r.id and r2.output_text
    assert r2.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens
    items = oai.responses.input_items.list(r2.id)
    assert any(getattr(it, "role", None) == "user" for it in items.data)


def test_responses_stream(oai, model):
    deltas, types, done = [], [], None
    with oai.responses.stream(model=model, input="Name a colour.", max_output_tokens=16, temperature=0) as s:
        for ev in s:
            types.append(ev.type)
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            elif ev.type in ("response.completed", "response.incomplete"):
                # get_final_response() wants response.completed; a response
                # cut at max_output_tokens ends with response.incomplete.
                done = ev.response
    assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete")
    assert "".join(deltas) == done.output_text and done.output_text
    assert oai.responses.retrieve(done.id).output_text == done.output_text


def test_responses_background_and_cancel(oai, model):
    r = oai.responses.create(model=model, input="Count from one to a thousand.", background=True,
                             max_output_tokens=1500, temperature=0, extra_body={"ignore_eos": True})
    assert r.background and r.status in ("queued", "in_progress")
    c = oai.responses.cancel(r.id)
    assert c.id == r.id and c.status == "cancelled"
    assert oai.responses.retrieve(r.id).status == "cancelled"
    # A background response that runs to its end is fetched by polling.
    b = oai.responses.create(model=model, input="Name a colour.", background=True, max_output_tokens=8, temperature=0)
    deadline = time.monotonic() + 30
    while b.status in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "background response did not finish in 30 s"
        time.sleep(0.05)  # polling the response's status, as the SDK's users do
        b = oai.responses.retrieve(b.id)
    assert b.status in ("completed", "incomplete") and b.output_text


def test_responses_websocket(oai, model):
    with oai.responses.connect() as conn:
        conn.response.create(model=model, input="Name a colour.", max_output_tokens=12, temperature=0, store=True)
        first, text = None, ""
        for ev in conn:
            if ev.type == "response.created":
                first = ev.response.id
            elif ev.type == "response.output_text.delta":
                text += ev.delta
            elif ev.type in ("response.completed", "response.incomplete"):
                done = ev.response
                break
            elif ev.type in ("error", "response.failed"):
                pytest.fail(f"{ev}")
        assert done.id == first and text and done.usage.output_tokens > 0
        # The next turn on the same socket chains by previous_response_id.
        conn.response.create(model=model, input="Another?", previous_response_id=first, max_output_tokens=8, temperature=0)
        for ev in conn:
            if ev.type in ("response.completed", "response.incomplete"):
                assert ev.response.previous_response_id == first
                assert ev.response.usage.input_tokens > done.usage.input_tokens
                break
            assert ev.type not in ("error", "response.failed"), f"{ev}"


def test_realtime(oai, model):
    with oai.realtime.connect(model=model) as conn:
        ev = conn.recv()
        assert ev.type == "session.created" and ev.session.model == model
        conn.session.update(session={"type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"]})
        conn.conversation.item.create(item={"type": "message", "role": "user",
                                            "content": [{"type": "input_text", "text": "Name a colour."}]})
        conn.response.create(response={"output_modalities": ["text"], "max_output_tokens": 12})
        text = ""
        for ev in conn:
            if ev.type == "response.output_text.delta":
                text += ev.delta
            elif ev.type == "response.done":
                u = ev.response.usage
                assert ev.response.status in ("completed", "incomplete")
                assert ev.response.output[0].content[0].text == text and text
                assert 0 < u.output_tokens <= 12 and u.total_tokens == u.input_tokens + u.output_tokens
                break
            assert ev.type != "error", f"{ev}"


def test_models(oai, model):
    ids = [m.id for m in oai.models.list()]
    assert model in ids
    assert oai.models.retrieve(model).id == model


# Errors: the SDK's own classes, from the status and the body's shape.

def test_error_400(oai, model):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=model, messages=Q, max_tokens=8, temperature=7)
    assert e.value.status_code == 400 and e.value.body["type"] == "invalid_request_error"
    assert e.value.param == "temperature"


def test_error_401(base_url, model):
    bad = openai.OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.chat.completions.create(model=model, messages=Q, max_tokens=8)
    assert e.value.status_code == 401 and e.value.code == "invalid_api_key"


def test_error_404(oai, model):
    with pytest.raises(openai.NotFoundError) as e:
        oai.chat.completions.create(model="no-such-model", messages=Q, max_tokens=8)
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve("resp_doesnotexist")


def test_error_429(oai, model, max_concurrent):
    # Hold every slot with a stream, then one more request is refused.
    held = []
    try:
        for _ in range(max_concurrent):
            s = oai.chat.completions.create(model=model, messages=Q, max_tokens=1500, stream=True,
                                            extra_body={"ignore_eos": True})
            next(iter(s))  # the first chunk: the request holds its slot
            held.append(s)
        with pytest.raises(openai.RateLimitError) as e:
            oai.chat.completions.create(model=model, messages=Q, max_tokens=8)
        assert e.value.status_code == 429 and e.value.response.headers.get("retry-after")
    finally:
        for s in held:
            s.close()


def test_embeddings(oai, model):
    texts = ["The cat sat on the mat.", "A kitten was sitting on the rug.", "Stock markets fell sharply on Tuesday."]
    r = oai.embeddings.create(model=model, input=texts)
    assert r.object == "list" and r.model == model and [d.index for d in r.data] == [0, 1, 2]
    v = [d.embedding for d in r.data]
    assert all(len(x) == len(v[0]) > 0 for x in v)
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))
    assert abs(dot(v[0], v[0]) - 1) < 1e-4  # unit vectors
    assert dot(v[0], v[1]) > dot(v[0], v[2])  # cat and kitten are closer than stocks
    assert r.usage.prompt_tokens == r.usage.total_tokens > len(texts)
    # The SDK asks for base64 unless told otherwise and decodes it; floats
    # asked for explicitly are the same numbers.
    f = oai.embeddings.create(model=model, input=texts[0], encoding_format="float")
    assert f.data[0].embedding == pytest.approx(v[0], abs=1e-6)
    ids = oai.embeddings.create(model=model, input=[[1, 2, 3], [4, 5]])
    assert len(ids.data) == 2 and ids.usage.prompt_tokens == 5
    with pytest.raises(openai.BadRequestError) as e:
        oai.embeddings.create(model=model, input="x", dimensions=8)
    assert e.value.param == "dimensions"
    with pytest.raises(openai.BadRequestError) as e:
        oai.embeddings.create(model=model, input="")
    assert e.value.param == "input"
