#!/usr/bin/python3
"""
hf_files.py — safetensors helpers for tests/cli_hf.sh (plain python3, no torch):

    hf_files.py compare ORIG EXPORTED   every tensor of ORIG but the attention
                                        mask buffers and a tied lm_head, by its
                                        bare name, equals EXPORTED's bit for bit
                                        as float32 (F16/BF16 widened exactly);
                                        EXPORTED is F32, bare names, in name
                                        order, contiguous, header padded to 8
    hf_files.py craft GOOD DIR          writes DIR/<case>.safetensors, each bad
                                        in one way, and DIR/cases.txt: "case
                                        words-the-refusal-must-contain"
    hf_files.py widen GOOD OUT V        GOOD with wte grown to V rows
"""
import json
import os
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    return json.loads(b[8:8 + n]), b[8 + n:], n


def as_f32_bits(dtype, raw):
    if dtype == "F32":
        return raw
    if dtype == "BF16":
        return b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))
    vals = struct.unpack("<%de" % (len(raw) // 2), raw)
    return struct.pack("<%df" % len(vals), *vals)


def bare(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


def is_buffer(name):
    return name.startswith("h.") and (name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"))


def compare(orig, exported):
    ho, do, _ = read(orig)
    he, de, hlen = read(exported)
    assert hlen % 8 == 0, "header not padded to 8 bytes"
    names = [k for k in he if k != "__metadata__"]
    assert names == sorted(names), "exported tensors not in name order"
    off = 0
    for k in names:
        t = he[k]
        assert t["dtype"] == "F32", k
        assert t["data_offsets"][0] == off, "not contiguous at " + k
        off = t["data_offsets"][1]
    assert off == len(de), "data length"
    want = {bare(k): v for k, v in ho.items() if k != "__metadata__" and not is_buffer(bare(k)) and k != "lm_head.weight"}
    assert set(want) == set(names), "names differ: %s" % sorted(set(want) ^ set(names))
    for k, t in want.items():
        e = he[k]
        assert e["shape"] == t["shape"], k
        a, b = t["data_offsets"]
        x, y = e["data_offsets"]
        assert as_f32_bits(t["dtype"], do[a:b]) == de[x:y], "tensor %s differs" % k
    print("ok: %d tensors bit for bit" % len(names))


def write(path, header, data, raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def craft(good, out):
    h, d, _ = read(good)
    whole = open(good, "rb").read()
    cases = []

    def case(name, why, header=None, data=None, raw=None, raw_header=None):
        p = os.path.join(out, name + ".safetensors")
        if raw is not None:
            open(p, "wb").write(raw)
        else:
            write(p, header if header is not None else h, d if data is None else data, raw_header)
        cases.append((name, why))

    def edit(f):
        x = json.loads(json.dumps(h))
        f(x)
        return x

    case("short", "too short", raw=whole[:5])
    case("empty", "too short", raw=b"")
    case("header_past_end", "truncated", raw=whole[:8] + whole[8:40])
    case("truncated_data", "outside the data", raw=whole[:len(whole) - 1000])
    case("huge_header_len", "truncated", raw=struct.pack("<Q", 1 << 63) + whole[8:100])
    case("not_json", "not JSON", raw_header=b"this is not json at all")
    case("json_array", "not a JSON object", raw_header=b"[1, 2, 3]")
    case("entry_not_object", "not a JSON object", edit(lambda x: x.__setitem__("wte", 7)))
    case("no_dtype", "lacks a dtype", edit(lambda x: x["wte"].pop("dtype")))
    case("dtype_f64", "dtype F64", edit(lambda x: x["wte"].__setitem__("dtype", "F64")))
    case("dtype_i64", "dtype I64", edit(lambda x: x["wpe"].__setitem__("dtype", "I64")))
    case("offsets_past_end", "outside the data",
         edit(lambda x: x["ln_f.bias"].__setitem__("data_offsets", [len(d) - 4, len(d) + 124])))
    case("offsets_reversed", "outside the data", edit(lambda x: x["wpe"].__setitem__("data_offsets", [100, 50])))
    case("offsets_negative", "outside the data", edit(lambda x: x["wpe"].__setitem__("data_offsets", [-8, 0])))
    case("overlap", "overlap", edit(lambda x: x["ln_f.bias"].__setitem__("data_offsets", list(x["ln_f.weight"]["data_offsets"]))))
    case("size_lies", "needs", edit(lambda x: x["wte"].__setitem__("shape", [256, 31])))
    case("huge_shape", "more elements than the file", edit(lambda x: x["wte"].__setitem__("shape", [1 << 40, 1 << 40])))
    case("shape_fraction", "bad shape", edit(lambda x: x["wte"].__setitem__("shape", [256.5, 32])))
    case("shape_negative", "bad shape", edit(lambda x: x["wte"].__setitem__("shape", [-256, -32])))
    case("wrong_shape", "expected [32, 96]", edit(lambda x: x["h.0.attn.c_attn.weight"].__setitem__("shape", [96, 32])))
    def vocab255(x):
        a, b = x["wte"]["data_offsets"]
        x["wte"] = {"dtype": "F32", "shape": [255, 32], "data_offsets": [a, b - 128]}
    case("vocab_255", "has 255 tokens and no tokenizer", edit(vocab255))
    case("missing_tensor", "no tensor 'h.1.mlp.c_fc.bias'", edit(lambda x: x.pop("h.1.mlp.c_fc.bias")))
    case("missing_wte", "no 'wte'", edit(lambda x: x.pop("wte")))
    def appended(name, entry, raw):
        """the header with one more tensor whose bytes are appended to the data"""
        x = json.loads(json.dumps(h))
        x[name] = dict(entry, data_offsets=[len(d), len(d) + len(raw)])
        return x, d + raw

    def bytes_of(name):
        a, b = h[name]["data_offsets"]
        return d[a:b]

    x, dd = appended("h.0.attn.extra", h["ln_f.bias"], bytes_of("ln_f.bias"))
    case("unknown_tensor", "not part of hpt's GPT-2", x, dd)
    x, dd = appended("transformer.wte", h["wte"], bytes_of("wte"))
    case("duplicate", "given twice", x, dd)
    x, dd = appended("lm_head.weight", h["wpe"], bytes_of("wpe"))
    case("lm_head_shape", "lm_head.weight's shape", x, dd)
    w = bytearray(bytes_of("wte"))
    w[4 * 1000 + 3] ^= 0x40
    x, dd = appended("lm_head.weight", h["wte"], bytes(w))
    case("lm_head_untied", "differs from wte at element 1000", x, dd)
    x, dd = appended("lm_head.weight", h["wte"], bytes_of("wte"))
    case("lm_head_tied_ok", "", x, dd)
    open(os.path.join(out, "cases.txt"), "w").write("".join("%s\t%s\n" % c for c in cases))


def widen(good, out, vocab):
    """GOOD with its wte grown to VOCAB rows (the new ones small values of an
    LCG, the same on every machine): a model of GPT-2's vocabulary size"""
    h, d, _ = read(good)
    V = int(vocab)
    rows, C = h["wte"]["shape"]
    assert h["wte"]["dtype"] == "F32" and V > rows
    s, extra = 12345, []
    for _ in range((V - rows) * C):
        s = (s * 1103515245 + 12345) % 2147483648
        extra.append((s / 2147483648.0 - 0.5) * 0.04)
    nh, nd, off = {}, b"", 0
    for name in sorted(h, key=lambda k: h[k]["data_offsets"][0] if k != "__metadata__" else -1):
        if name == "__metadata__":
            nh[name] = h[name]
            continue
        a, b = h[name]["data_offsets"]
        raw = d[a:b]
        e = dict(h[name])
        if name == "wte":
            raw += struct.pack("<%df" % len(extra), *extra)
            e["shape"] = [V, C]
        e["data_offsets"] = [off, off + len(raw)]
        nh[name], nd, off = e, nd + raw, off + len(raw)
    write(out, nh, nd)


if __name__ == "__main__":
    {"compare": compare, "craft": craft, "widen": widen}[sys.argv[1]](*sys.argv[2:])
