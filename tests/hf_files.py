#!/usr/bin/python3
"""
hf_files.py — safetensors helpers for tests/cli_hf.sh (plain python3, no torch):

    hf_files.py compare ORIG EXPORTED   every tensor of ORIG but the attention
                                        mask buffers and a tied lm_head, by its
                                        bare name, equals EXPORTED's bit for bit
                                        as float32 (F16/BF16 widened exactly);
                                        EXPORTED is F32, the hub's bare names
                                        (GPT2Model's: wte.weight, ...), in name
                                        order, contiguous, header padded to 8
    hf_files.py craft GOOD DIR          writes DIR/<case>.safetensors, each bad
                                        in one way (or, with an empty reason,
                                        good in an unusual one), and
                                        DIR/cases.txt: "case
                                        words-the-refusal-must-contain"
    hf_files.py widen GOOD OUT V        GOOD with wte.weight grown to V rows
    hf_files.py hollow OUT C L          a hollow file: a wte of 256 x C and a
                                        wpe of 1 x C (F16 zeros, under hpt's old
                                        names wte / wpe, which import still
                                        takes) and L zero-length
                                        h.N.ln_1.weight: a few hundred KB that
                                        describe an L-layer, C-wide model
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
    case("entry_not_object", "not a JSON object", edit(lambda x: x.__setitem__("wte.weight", 7)))
    case("no_dtype", "lacks a dtype", edit(lambda x: x["wte.weight"].pop("dtype")))
    case("dtype_f64", "dtype F64", edit(lambda x: x["wte.weight"].__setitem__("dtype", "F64")))
    case("dtype_i64", "dtype I64", edit(lambda x: x["wpe.weight"].__setitem__("dtype", "I64")))
    case("offsets_past_end", "outside the data",
         edit(lambda x: x["ln_f.bias"].__setitem__("data_offsets", [len(d) - 4, len(d) + 124])))
    case("offsets_reversed", "outside the data", edit(lambda x: x["wpe.weight"].__setitem__("data_offsets", [100, 50])))
    case("offsets_negative", "outside the data", edit(lambda x: x["wpe.weight"].__setitem__("data_offsets", [-8, 0])))
    case("overlap", "overlap", edit(lambda x: x["ln_f.bias"].__setitem__("data_offsets", list(x["ln_f.weight"]["data_offsets"]))))
    def hidden_overlap(x):
        """ln_f.weight moved to overlap ln_f.bias's last half,
        an empty entry between the two starts (in offset order: ln_f.bias,
        the empty one, ln_f.weight), which a neighbours-only check skips"""
        a, b = x["ln_f.bias"]["data_offsets"]
        x["ln_f.weight"]["data_offsets"] = [a + 64, b + 64]
        x["h.0.attn.masked_bias"] = {"dtype": "F32", "shape": [0], "data_offsets": [a + 32, a + 32]}
    case("overlap_hidden", "overlap", edit(hidden_overlap))
    def nested_overlap(x):
        """a short tensor inside a long one, a tensor after both"""
        a, b = x["wte.weight"]["data_offsets"]
        x["ln_f.bias"]["data_offsets"] = [a + 256, a + 384]
    case("overlap_nested", "overlap", edit(nested_overlap))
    case("size_lies", "needs", edit(lambda x: x["wte.weight"].__setitem__("shape", [256, 31])))
    case("huge_shape", "more elements than the file", edit(lambda x: x["wte.weight"].__setitem__("shape", [1 << 40, 1 << 40])))
    case("shape_fraction", "bad shape", edit(lambda x: x["wte.weight"].__setitem__("shape", [256.5, 32])))
    case("shape_negative", "bad shape", edit(lambda x: x["wte.weight"].__setitem__("shape", [-256, -32])))
    case("wrong_shape", "expected [32, 96]", edit(lambda x: x["h.0.attn.c_attn.weight"].__setitem__("shape", [96, 32])))
    def vocab255(x):
        a, b = x["wte.weight"]["data_offsets"]
        x["wte.weight"] = {"dtype": "F32", "shape": [255, 32], "data_offsets": [a, b - 128]}
    case("vocab_255", "has 255 tokens and no tokenizer", edit(vocab255))
    case("missing_tensor", "no tensor 'h.1.mlp.c_fc.bias'", edit(lambda x: x.pop("h.1.mlp.c_fc.bias")))
    case("missing_wte", "no 'wte.weight'", edit(lambda x: x.pop("wte.weight")))
    def bias_u8(x):
        """a parameter in a mask buffer's dtype (4 U8 elements per F32's bytes)"""
        x["ln_f.bias"] = dict(x["ln_f.bias"], dtype="U8", shape=[128])
    case("param_u8", "a parameter must be F32, F16 or BF16", edit(bias_u8))
    def old_names(x):
        """the names an older hpt export wrote (wte, wpe)"""
        x["wte"] = x.pop("wte.weight")
        x["wpe"] = x.pop("wpe.weight")
    case("old_hpt_names", "", edit(old_names))
    case("metadata_not_object", "__metadata__", edit(lambda x: x.__setitem__("__metadata__", "pt")))
    def appended(name, entry, raw):
        """the header with one more tensor whose bytes are appended to the data"""
        x = json.loads(json.dumps(h))
        x[name] = dict(entry, data_offsets=[len(d), len(d) + len(raw)])
        return x, d + raw

    def bytes_of(name):
        a, b = h[name]["data_offsets"]
        return d[a:b]

    untied = bytearray(bytes_of("wte.weight"))
    untied[4 * 1000 + 3] ^= 0x40
    # (case, what the refusal names, the tensor appended, the one whose
    # dtype, shape and bytes it copies, those bytes changed where not None)
    for name, want, tensor, like, data in (
            ("unknown_tensor", "not part of hpt's GPT-2", "h.0.attn.extra", "ln_f.bias", None),
            ("duplicate", "given twice", "transformer.wte.weight", "wte.weight", None),
            ("duplicate_old_name", "given twice", "wte", "wte.weight", None),
            ("lm_head_shape", "lm_head.weight's dtype or shape", "lm_head.weight", "wpe.weight", None),
            ("lm_head_untied", "differs from wte.weight at element 1000", "lm_head.weight", "wte.weight",
             bytes(untied)),
            ("lm_head_tied_ok", "", "lm_head.weight", "wte.weight", None),
            ("block_300", "1 to 256 transformer blocks", "h.300.attn.bias", "h.0.attn.masked_bias", None),
            ("block_gap", "no tensor 'h.2.ln_1.weight'", "h.2.attn.bias", "h.0.attn.masked_bias", None),
            ("block_leading_zero", "not part of hpt's GPT-2", "h.01.ln_1.weight", "h.0.ln_1.weight", None)):
        x, dd = appended(tensor, h[like], bytes_of(like) if data is None else data)
        case(name, want, x, dd)
    # the mask as transformers registered it later: bool, 1 byte each (the
    # F32 one's bytes are left as an unreferenced gap)
    P = h["h.0.attn.bias"]["shape"][-1]
    x, dd = appended("h.0.attn.bias", {"dtype": "BOOL", "shape": [1, 1, P, P]}, bytes(P * P))
    case("mask_bool_ok", "", x, dd)
    open(os.path.join(out, "cases.txt"), "w").write("".join("%s\t%s\n" % c for c in cases))


def widen(good, out, vocab):
    """GOOD with its wte grown to VOCAB rows (the new ones small values of an
    LCG, the same on every machine): a model of GPT-2's vocabulary size"""
    h, d, _ = read(good)
    V = int(vocab)
    rows, C = h["wte.weight"]["shape"]
    assert h["wte.weight"]["dtype"] == "F32" and V > rows
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
        if name == "wte.weight":
            raw += struct.pack("<%df" % len(extra), *extra)
            e["shape"] = [V, C]
        e["data_offsets"] = [off, off + len(raw)]
        nh[name], nd, off = e, nd + raw, off + len(raw)
    write(out, nh, nd)


def hollow(out, width, layers):
    C, L = int(width), int(layers)
    header, off = {}, 0
    for name, rows in (("wte", 256), ("wpe", 1)):
        header[name] = {"dtype": "F16", "shape": [rows, C], "data_offsets": [off, off + 2 * rows * C]}
        off += 2 * rows * C
    for l in range(L):
        header["h.%d.ln_1.weight" % l] = {"dtype": "F32", "shape": [0], "data_offsets": [off, off]}
    write(out, header, bytes(off))


if __name__ == "__main__":
    {"compare": compare, "craft": craft, "widen": widen, "hollow": hollow}[sys.argv[1]](*sys.argv[2:])
