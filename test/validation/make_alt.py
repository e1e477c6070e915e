#!/usr/bin/python3
"""The validation table's second writing (issue 39): every model
validate.py plans, from its zoo configuration
(examples/models/zoo/make_zoo.py), written the way another exporter would,
by the invariance test's builders (test/invariance/make_writings.py):

  GPT (Megatron / Megatron-Core)   make_writings gpt "spelled": LayerNorm
      spelled out, separate Q/K/V Linear with biases, Div scale, additive
      mask, tanh GELU; learned positions Sliced from their table; head tied
      (MatMul by the embedding's Transpose) or its own, as the zoo config
  LLaMA / LLaMA-2                  make_writings llama "b": RMSNorm as
      Mul(x,x)/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul, fused gate-up
      MatMul + Split, Mul scale, Where mask; for a row longer than the
      zoo's position tables, the rotary tables computed from the positions
      as Hugging Face's LlamaRotaryEmbedding exports them
  MoE (Qwen3-30B-A3B)              make_writings moe "b": attention as
      llama "b" with QK-norm on the transposed heads, router softmax
      spelled out, top-k renormalised, the experts as Megatron-Core's
      dropless permute / unpermute (token copies sorted by expert with
      TopK, Gather, [E, T*K/E, d] groups at the mean load, stacked SwiGLU
      weights, ScatterND(add) back; the zoo writes a capacity dispatch by
      TopK per expert). make_writings' own MoE spelling, a loop gated by
      Equal(TopK index, e), computes every expert on every token (16x the
      expert FLOPs at top-8 of 128) and is costed so: not the run's work.

Shape-only like the zoo (weights in an external file that is not there;
the causal mask built from Range; the rotary tables [seq, head_dim] the
only data, up to the zoo's max_pos), fp16, batch symbolic, the sequence static: so a model is
written per (NAME, SEQ), as OUT/NAME-alt-sSEQ.onnx.

    /usr/bin/python3 test/validation/make_alt.py OUT NAME:SEQ[,NAME:SEQ...]
        [--as FAMILY=WRITING,...]

--as picks another make_writings writing per family (gpt: compact,
spelled, gemm; llama and moe: a, b, c), for comparing writings; the files
are then named NAME-WRITING-sSEQ.onnx (validate.py plans the defaults).

Only onnx + numpy and the standard library.
"""

import sys

sys.dont_write_bytecode = True

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "examples", "models", "zoo"))
sys.path.insert(0, os.path.join(SRC, "test", "invariance"))

WRITING = {"gpt": "spelled", "llama": "b", "moe": "b"}


def file_name(name, seq, tag="alt"):
    return f"{name}-{tag}-s{seq}.onnx"


def build(cfg, seq, writing=None):
    """cfg (a make_zoo Config) at sequence length seq, in the alternative
    writing; a ValueError names what the builders cannot write."""
    import make_writings as mw  # noqa: E402  (onnx is imported only here)
    w = dict(WRITING, **(writing or {}))
    lm = {"vocab": cfg.vocab, "max_pos": cfg.max_pos, "tied": cfg.tied}
    if cfg.family == "gpt" and not cfg.experts:
        if cfg.hd * cfg.heads != cfg.hidden:
            raise ValueError(f"{cfg.name}: head width {cfg.hd} x {cfg.heads} "
                             f"heads is not the hidden size")
        return mw.gpt(w["gpt"], d=cfg.hidden, H=cfg.heads,
                      L=cfg.layers, S=seq, f=cfg.ffn, lm=lm)
    if cfg.family != "llama" or cfg.dense_layers or cfg.shared_ffn:
        raise ValueError(f"{cfg.name}: no alternative writing for a "
                         f"{cfg.family} model"
                         + (" with dense layers or shared experts"
                            if cfg.family == "llama" else ""))
    common = dict(d=cfg.hidden, H=cfg.heads, KV=cfg.kvh, L=cfg.layers,
                  S=seq, lm=lm)
    if cfg.experts:
        return mw.moe(w["moe"], f=cfg.expert_ffn, E=cfg.experts,
                      K=cfg.top_k, hd=cfg.hd, qk_norm=cfg.qk_norm,
                      normalize=cfg.normalize_topk, experts="sorted",
                      **common)
    if cfg.qk_norm or cfg.hd * cfg.heads != cfg.hidden:
        raise ValueError(f"{cfg.name}: the dense LLaMA writing has no "
                         f"QK-norm and heads of hidden / heads")
    # A row longer than the zoo's position tables (a long-context run):
    # the rotary tables computed in the graph, so that the file holds no
    # [seq, head_dim] data (536 MB at 1M tokens).
    rope = "computed" if seq > cfg.max_pos else "data"
    return mw.llama(w["llama"], f=cfg.ffn, rope=rope, **common)


def main(argv):
    writing, tag = {}, "alt"
    if len(argv) == 4 and argv[2] == "--as":
        try:
            writing = dict(kv.split("=", 1) for kv in argv[3].split(","))
        except ValueError:
            sys.exit(f"make_alt.py: bad --as '{argv[3]}' (FAMILY=WRITING,...)")
        import make_writings as mw  # noqa: E402
        for fam, wr in writing.items():
            if fam not in WRITING or wr not in mw.MODELS[fam][1]:
                sys.exit(f"make_alt.py: bad --as '{fam}={wr}'")
        tag = "-".join(writing[f] for f in sorted(writing))
        argv = argv[:2]
    if len(argv) != 2:
        sys.exit("usage: make_alt.py OUT NAME:SEQ[,NAME:SEQ...] "
                 "[--as FAMILY=WRITING,...]")
    out, items = argv
    import make_zoo  # noqa: E402
    import onnx  # noqa: E402
    os.makedirs(out, exist_ok=True)
    for item in items.split(","):
        name, _, seq = item.partition(":")
        if name not in make_zoo.ALL or not seq.isdigit():
            sys.exit(f"make_alt.py: bad model '{item}' (NAME:SEQ, NAME a "
                     f"make_zoo model)")
        try:
            model = build(make_zoo.ALL[name], int(seq), writing)
        except ValueError as e:
            sys.exit(f"make_alt.py: {e}")
        path = os.path.join(out, file_name(name, int(seq), tag))
        tmp = path + ".tmp"
        onnx.save(model, tmp)
        os.replace(tmp, path)


if __name__ == "__main__":
    main(sys.argv[1:])
