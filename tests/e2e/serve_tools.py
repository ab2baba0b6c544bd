"""The official `openai` client against zaya serve --chat-format zaya (run by
tests/e2e/serve_tools.sh). Mode "scripted": the server's test hook answers chat
request N with reply N of serve_tools.sh (a call of GetWeather, the answer after
the tool result, the call again streamed, a malformed call, a text with thinking
off), so what is checked is the server's reading of known text: reasoning,
content, tool calls typed by the schema, the client's tool helpers, the tool
loop's second turn rendered and answered. Mode "model": the tiny model's own
answers, whatever they are, come back well formed (a call or content), a forced
call is prefilled, and whole and streamed answers agree.

Usage: serve_tools.py BASE_URL API_KEY scripted|model
"""
import json
import sys

import openai
import pydantic

base_url, api_key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)


class GetWeather(pydantic.BaseModel):
    """The weather in a city for some days."""
    city: str
    days: int


tools = [openai.pydantic_function_tool(GetWeather)]
user = {"role": "user", "content": "What is the weather in Bonn?"}


def expect(ok, message):
    if not ok:
        print(f"FAIL: {message}", file=sys.stderr, flush=True)
        sys.exit(1)


def extra(obj, name):
    return (obj.model_extra or {}).get(name)


def scripted():
    # Request 0: a call, read by the client's parse helper into the pydantic model.
    r = client.chat.completions.parse(model="m", messages=[user], tools=tools, max_tokens=8, seed=1)
    c = r.choices[0]
    expect(c.finish_reason == "tool_calls", f"finish_reason {c.finish_reason!r}")
    expect(c.message.content == "Let me look.", f"content {c.message.content!r}")
    expect(extra(c.message, "reasoning_content") == "The user asks for the weather." ==
           extra(c.message, "reasoning"), f"reasoning {c.message.model_extra}")
    call = c.message.tool_calls[0]
    expect(call.id.startswith("call_") and call.type == "function" and call.function.name == "GetWeather",
           f"call {call}")
    expect(call.function.parsed_arguments == GetWeather(city="Bonn", days=2), f"parsed {call.function}")
    expect(json.loads(call.function.arguments) == {"city": "Bonn", "days": 2}, "days is an integer")
    print(f"ok: a tool call through chat.completions.parse: {call.function.name}({call.function.arguments})")

    # Request 1: the tool loop's second turn: the call and its result go back, the answer comes.
    history = [user, {"role": "assistant", "content": c.message.content, "reasoning_content": "x",
                      "tool_calls": [{"id": call.id, "type": "function",
                                      "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
               {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"sky": "sunny"})}]
    r = client.chat.completions.create(model="m", messages=history, tools=tools, max_tokens=8, seed=1)
    m = r.choices[0].message
    expect(m.content == "It is sunny in Bonn." and not m.tool_calls, f"second turn {m}")
    expect(extra(m, "reasoning_content") == "Got the result.", f"second turn reasoning {m.model_extra}")
    expect(r.usage.prompt_tokens > 0, "usage")
    print(f"ok: the tool loop's second turn: {m.content!r} ({r.usage.prompt_tokens} prompt tokens)")

    # Request 2: the call streamed, through the client's stream helper; the raw deltas too.
    reasoning, content, deltas = "", "", []
    with client.chat.completions.stream(model="m", messages=[user], tools=tools, max_tokens=8, seed=1) as stream:
        for event in stream:
            if event.type == "chunk" and event.chunk.choices:
                d = event.chunk.choices[0].delta
                reasoning += extra(d, "reasoning_content") or ""
                content += d.content or ""
                deltas += d.tool_calls or []
        final = stream.get_final_completion()
    expect(reasoning == "The user asks for the weather." and content == "Let me look.",
           f"streamed reasoning {reasoning!r}, content {content!r}")
    expect(len(deltas) == 1 and deltas[0].index == 0 and deltas[0].function.name == "GetWeather", f"deltas {deltas}")
    fc = final.choices[0]
    expect(fc.finish_reason == "tool_calls" and fc.message.tool_calls[0].function.parsed_arguments ==
           GetWeather(city="Bonn", days=2), f"streamed final {fc}")
    print("ok: the call streamed: reasoning and content deltas, one tool-call delta, parsed by the stream helper")

    # Request 3: a malformed call is content (the server logs a warning), never an error.
    r = client.chat.completions.create(model="m", messages=[user], tools=tools, max_tokens=8,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    m = r.choices[0].message
    expect(not m.tool_calls and m.content.startswith("<zyphra_tool_call>\n<function=Nope>"), f"malformed {m}")
    print(f"ok: a malformed call is content: {m.content[:40]!r}")

    # Request 4: thinking off: no reasoning, "</think>" is text.
    r = client.chat.completions.create(model="m", messages=[user], max_tokens=8,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    m = r.choices[0].message
    expect(m.content == "plain answer </think> here" and extra(m, "reasoning_content") is None, f"thinking off {m}")
    print("ok: enable_thinking false: all content")

    # Bad tools are 400s naming the field.
    for bad, param in [([{"type": "function", "function": {"name": "a b"}}], "tools[0].function.name"),
                       ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
                        "tools[0].function.parameters.type")]:
        try:
            client.chat.completions.create(model="m", messages=[user], tools=bad)
            expect(False, f"{bad} was accepted")
        except openai.BadRequestError as e:
            expect(e.body.get("param") == param, f"param {e.body}")
    print("ok: bad tools are BadRequestError naming the field")


def model():
    plain = client.chat.completions.create(model="m", messages=[user], max_tokens=12, seed=5, temperature=0)
    m = plain.choices[0].message
    # Thinking is on by default and a tiny model never closes the think block: its text is reasoning.
    expect(extra(m, "reasoning_content") and not m.content, f"default thinking: {m}")
    with_tools = client.chat.completions.create(model="m", messages=[user], tools=tools, max_tokens=12, seed=5,
                                                temperature=0)
    expect(with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + 20,
           f"tools are not in the prompt: {with_tools.usage.prompt_tokens} vs {plain.usage.prompt_tokens}")
    off = client.chat.completions.create(model="m", messages=[user], max_tokens=12, seed=5, temperature=0,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    expect(off.choices[0].message.content and extra(off.choices[0].message, "reasoning_content") is None,
           f"thinking off: {off.choices[0].message}")
    print(f"ok: the model's reasoning {extra(m, 'reasoning_content')[:30]!r}; tools add "
          f"{with_tools.usage.prompt_tokens - plain.usage.prompt_tokens} prompt tokens; thinking off gives content")
    forced = dict(model="m", messages=[user], tools=tools, max_tokens=24, seed=5, temperature=0,
                  tool_choice={"type": "function", "function": {"name": "GetWeather"}})
    whole = client.chat.completions.create(**forced).choices[0]
    streamed_content, streamed_calls = "", []
    for chunk in client.chat.completions.create(stream=True, **forced):
        if chunk.choices:
            streamed_content += chunk.choices[0].delta.content or ""
            streamed_calls += chunk.choices[0].delta.tool_calls or []
    if whole.message.tool_calls:
        expect(whole.message.tool_calls[0].function.name == "GetWeather", f"forced call {whole.message}")
        expect([c.function.arguments for c in streamed_calls] ==
               [c.function.arguments for c in whole.message.tool_calls], "streamed calls differ")
        print(f"ok: the forced call: GetWeather({whole.message.tool_calls[0].function.arguments})")
    else:
        expect(whole.message.content.startswith("<zyphra_tool_call>\n<function=GetWeather>\n"),
               f"a forced call neither read nor passed on: {whole.message}")
        print(f"ok: the forced call the tiny model could not finish is content: {whole.message.content[:60]!r}")
    expect(streamed_content == (whole.message.content or ""), "streamed content differs from the whole answer's")


scripted() if mode == "scripted" else model()
