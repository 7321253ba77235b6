"""The anthropic Python SDK (2.x) against Vajra on the real model."""

import anthropic
import pytest

# anthropic 2.x has no temperature parameter; the API still takes one.
GREEDY = {"temperature": 0}


def prompt_tokens(u):
    """The whole prompt: Anthropic's input_tokens leaves out the cached part."""
    return u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)


MSGS = [{"role": "user", "content": "What is the capital of France?"}]


def test_messages(ant, model):
    m = ant.messages.create(model=model, max_tokens=16, messages=MSGS, extra_body=GREEDY)
    assert m.id.startswith("msg_") and m.role == "assistant" and m.model == model
    assert m.content[0].type == "text" and m.content[0].text.strip()
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert prompt_tokens(m.usage) > 0 and 0 < m.usage.output_tokens <= 16


def test_messages_stream_equals_non_stream(ant, model):
    kw = dict(model=model, max_tokens=16, messages=MSGS, extra_body=GREEDY, system="Answer in one word.")
    whole = ant.messages.create(**kw)
    with ant.messages.stream(**kw) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert prompt_tokens(final.usage) == prompt_tokens(whole.usage)


def test_messages_multi_turn(ant, model):
    first = ant.messages.create(model=model, max_tokens=8, messages=MSGS, extra_body=GREEDY)
    msgs = MSGS + [{"role": "assistant", "content": first.content[0].text},
                   {"role": "user", "content": "And of Italy?"}]
    second = ant.messages.create(model=model, max_tokens=8, messages=msgs, extra_body=GREEDY)
    assert second.content[0].text
    assert prompt_tokens(second.usage) > prompt_tokens(first.usage) + first.usage.output_tokens


def test_messages_tools(ant, model):
    tool = {"name": "get_weather", "description": "Get the current weather in a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    m = ant.messages.create(model=model, max_tokens=48, extra_body=GREEDY, tools=[tool], tool_choice={"type": "any"},
                            messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert m.stop_reason == "tool_use"
    use = [b for b in m.content if b.type == "tool_use"][0]
    assert use.name == "get_weather" and use.id and isinstance(use.input["city"], str)


def test_count_tokens(ant, model):
    n = ant.messages.count_tokens(model=model, messages=MSGS)
    m = ant.messages.create(model=model, max_tokens=4, messages=MSGS, extra_body=GREEDY)
    assert n.input_tokens == prompt_tokens(m.usage) > 0


def test_errors(ant, base_url, model):
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.messages.create(model=model, max_tokens=16, messages=[])
    assert e.value.status_code == 400 and e.value.body["error"]["type"] == "invalid_request_error"
    bad = anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        bad.messages.create(model=model, max_tokens=16, messages=MSGS)
    assert e.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.NotFoundError) as e:
        ant.messages.create(model="no-such-model", max_tokens=16, messages=MSGS)
    assert e.value.body["error"]["type"] == "not_found_error"
