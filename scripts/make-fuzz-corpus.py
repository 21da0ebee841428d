#!/usr/bin/env python3
"""Regenerates the seed corpora fuzz/corpus/{sse,chunk,json}/ from the llama-server wire
transcripts plus hand-written inputs in the shapes the unit tests use.

Usage: scripts/make-fuzz-corpus.py [WIRE_DIR]   (default tests/data/wire/llamacpp-v0.5.0)

Only files named gen-* are written or removed, so crashers added to the corpus by hand stay.
The output is deterministic: the same transcripts give the same files.
"""
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = re.compile(rb"^\[\+ *[0-9.]+ms\] ")
MAX_FILE = 4096  # keep seeds small: libFuzzer mutates them faster
MAX_WIRE_CHUNKS = 24  # distinct transcript payload shapes kept for the chunk corpus
JSON_FROM_CHUNKS = ("vllm-usage", "escapes", "escaped-keys", "err-vllm", "nonstream", "done")


def transcript_lines(path):
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            yield PREFIX.sub(b"", line, count=1)


def sse_body(path):
    """data: and : lines of a transcript, each followed by the blank line the capture dropped."""
    out = []
    for line in transcript_lines(path):
        if line.startswith(b"data:") or line.startswith(b":"):
            out.append(line + b"\n\n")
    return b"".join(out)


def small(body):
    """The first events of body that fit MAX_FILE (whole events only)."""
    if len(body) <= MAX_FILE:
        return body
    cut = body.rfind(b"\n\n", 0, MAX_FILE)
    return body[: cut + 2] if cut > 0 else body[:MAX_FILE]


SSE_CASES = {
    "comments": b": ping\n\n:\ndata: x\n: inside\n\n",
    "crlf": b"data: a\r\n\r\ndata: b\r\n\r\ndata: [DONE]\r\n\r\n",
    "cr": b"data: a\r\rdata: b\rdata: c\r\r",
    "mixed-eol": b"data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\r\n",
    "multiline": b"data: line1\ndata: line2\ndata:\n\ndata: {\"a\":\ndata: 1}\n\n",
    "no-space": b"data:x\n\ndata:  y\n\ndata\n\ndata:\n\n",
    "fields": b"event: ping\n\nid: 7\nretry: 100\ndata: x\nfoo: bar\n\ndat: no\n\n",
    "no-final-blank": b"data: {\"a\":1}\n\ndata: last\n",
    "truncated": b"data: ok\n\ndata: {\"choices\":[{\"te",
    "stop": b"data: 1\n\ndata: STOP here\n\ndata: 3\n\n",
    "big-event": b"data: " + b"x" * 600 + b"\n\n",
    "many-lines": b"".join(b"data: %d\n" % i for i in range(100)) + b"\n",
    "trtllm-space": b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]} \n\n",
}

CHUNK_CASES = {
    "vllm-role": b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1718000000,'
    b'"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    b'"logprobs":null,"finish_reason":null}]}',
    "vllm-final": b'{"choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,'
    b'"finish_reason":"length","stop_reason":null}]}',
    "vllm-usage": b'{"choices":[],"usage":{"prompt_tokens":1000,"total_tokens":1128,'
    b'"completion_tokens":128,"prompt_tokens_details":{"cached_tokens":992}}}',
    "vllm-token-ids": b'{"choices":[{"index":0,"delta":{"content":" the quick"},'
    b'"token_ids":[279,4062,3]}]}',
    "vllm-completions": b'{"id":"cmpl-9","object":"text_completion","choices":[{"index":0,'
    b'"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}',
    "vllm-reasoning": b'{"choices":[{"index":0,"delta":{"reasoning":"Let me think",'
    b'"reasoning_content":"Let me think"}}]}',
    "sglang-finish": b'{"id":"a1","choices":[{"index":0,"delta":{"role":null,"content":null,'
    b'"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop",'
    b'"matched_stop":128009}],"usage":null}',
    "sglang-reasoning": b'{"choices":[{"index":0,"delta":{"content":null,'
    b'"reasoning_content":"hmm"}}]}',
    "tgi-chat": b'{"object":"chat.completion.chunk","id":"","choices":[{"index":0,"delta":'
    b'{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":null}],'
    b'"usage":null}',
    "tgi-completions": b'{"id":"","object":"text_completion","choices":[{"index":0,"text":" a",'
    b'"logprobs":null,"finish_reason":""}]}',
    "trtllm-role": b'{"id":"chatcmpl-5","choices":[{"index":0,"delta":{"role":"assistant"},'
    b'"logprobs":null,"finish_reason":null}]} ',
    "nonstream": b'{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant",'
    b'"content":"4","reasoning_content":"2+2"}}],"usage":{"prompt_tokens":4,'
    b'"completion_tokens":1}}',
    "escapes": b'{"choices":[{"index":0,"text":"a\\nb \\u00e9 \\ud83d\\ude00 \\ud83d \\"q\\""}]}',
    "escaped-keys": b'{"ch\\u006fices":[{"d\\u0065lta":{"content":"xy"}}]}',
    "err-vllm": b'{"error":{"message":"The model `x` does not exist.","type":"NotFoundError",'
    b'"param":null,"code":404}}',
    "err-sglang": b'{"error":{"object":"error","message":"bad","type":"BadRequestError",'
    b'"param":null,"code":400}}',
    "err-tgi-health": b'{"error":"unhealthy","error_type":"healthcheck"}',
    "err-tgi-stream": b'{"error":{"message":"Request failed","http_status_code":422}}',
    "err-flat": b'{"object":"error","message":"max_tokens too large","type":"BadRequestError",'
    b'"param":null,"code":400}',
    "err-string-code": b'{"error":{"code":"context_length_exceeded","message":"too long"}}',
    "done": b"[DONE]",
    "done-spaces": b" [DONE] \r\n",
    "not-object": b"[1,2]",
    "bad-utf8": b'{"choices":[{"text":"\xed\xa0\x80"}]}',
}

JSON_CASES = {
    "scalars": b'[0,-0,1.5e-3,-12E+4,true,false,null,"",9223372036854775807,1e400]',
    "nested": b'{"a":{"b":[[{"c":[]}],{}]},"a":2}',
    "escapes": b'"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u00e9\\ud83d\\ude00\\udc00"',
    "whitespace": b' \t\r\n{ "k" : [ 1 , 2 ] } \n',
    "escaped-key": b'{"k\\u0065y":1,"key":2}',
    "deep": b"[" * 70 + b"]" * 70,
    "utf8": '{"日本":"café ☃ 😀"}'.encode(),
    "bad-trailing": b'{"a":1} x',
    "bad-comma": b'{"a":1,}',
    "bad-number": b'[01, 1., .5, -]',
    "bad-utf8": b'["\xc0\xaf"]',
}


def write_dir(name, items):
    d = os.path.join(ROOT, "fuzz", "corpus", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("gen-"):
            os.remove(os.path.join(d, f))
    for fname, data in sorted(items.items()):
        with open(os.path.join(d, "gen-" + fname), "wb") as f:
            f.write(data)
    return len(items)


def main():
    wire = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "tests", "data", "wire", "llamacpp-v0.5.0")
    if not os.path.isdir(wire):
        sys.exit("make-fuzz-corpus: no transcripts at %s" % wire)
    names = sorted(f for f in os.listdir(wire) if f.endswith(".txt"))

    sse, chunk, js = {}, {}, {}
    payloads = []
    json_per_file = {}
    for n in names:
        path = os.path.join(wire, n)
        base = n[:-4]
        body = sse_body(path)
        if body:
            sse["wire-" + base] = small(body)
            for line in transcript_lines(path):
                if line.startswith(b"data: "):
                    payloads.append(line[6:])
        for line in transcript_lines(path):
            # Whole JSON bodies printed by curl (errors, /health, /props, /slots, /models): the
            # first two of each transcript.
            if line.startswith(b"{") and len(line) <= MAX_FILE and json_per_file.get(n, 0) < 2:
                json_per_file[n] = json_per_file.get(n, 0) + 1
                js["wire-%s-%s" % (base, hashlib.sha1(line).hexdigest()[:8])] = line
    # Line ends other than LF for two streams.
    for base in ("chat_stream_include_usage", "completions_stream"):
        b = sse.get("wire-" + base)
        if b:
            sse["wire-%s-crlf" % base] = b.replace(b"\n", b"\r\n")
            sse["wire-%s-cr" % base] = b.replace(b"\n", b"\r")
    # Distinct event payloads, by shape: the key order of the first 60 bytes tells shapes apart.
    seen = set()
    for p in payloads:
        shape = re.sub(rb'"[^"]*"', b'""', p[:60])
        if shape in seen or len(p) > MAX_FILE or len(seen) >= MAX_WIRE_CHUNKS:
            continue
        seen.add(shape)
        chunk["wire-%s" % hashlib.sha1(p).hexdigest()[:8]] = p
    for k, v in SSE_CASES.items():
        sse["case-" + k] = v
    for k, v in CHUNK_CASES.items():
        chunk["case-" + k] = v
        if k in JSON_FROM_CHUNKS:
            js["chunk-" + k] = v
    for k, v in JSON_CASES.items():
        js["case-" + k] = v

    counts = [write_dir("sse", sse), write_dir("chunk", chunk), write_dir("json", js)]
    print("make-fuzz-corpus: sse %d, chunk %d, json %d files" % tuple(counts))


if __name__ == "__main__":
    main()
