"""The architectures of Loom's model zoo (make_zoo.py): one function per
family (build_gpt, build_llama, build_bert, build_vit, build_dlrm, in
BUILDERS by Config.family) that writes the whole graph with a
zoo_builder.Builder and returns its graph inputs and outputs, and their
helpers (rotary_tables, encoder_attention).

make_zoo.py's docstring describes the graph layout. Only onnx + numpy +
the standard library.
"""

import sys

sys.dont_write_bytecode = True  # keep examples/models free of __pycache__

import numpy as np
from onnx import TensorProto, helper

from zoo_builder import FLOAT_MIN, vinfo  # noqa: E402


# --------------------------------------------------------------------------
# Architectures
# --------------------------------------------------------------------------

def build_gpt(b, c):
    """Megatron GPT (GPT-3 layout): learned positions, pre-LN, fused QKV with
    biases, GELU MLP 4h (or MoE), final LN, head tied to the embedding."""
    h, nh, hd = c.hidden, c.heads, c.hd
    ids = "input_ids"
    with b.scope("embedding", "word_embeddings"):
        wte = b.param("weight", [c.vocab, h], "embedding")
        tok = b.op("Gather", [wte, ids], axis=0)
    with b.scope("embedding", "position_embeddings"):
        s = b.dim(ids, 1, unsqueeze=False)
        pos = b.op("Range", [b.i64(0), s, b.i64(1)])
        pos = b.op("Unsqueeze", [pos, b.i64([0])])
        wpe = b.param("weight", [c.max_pos, h], "embedding")
        pe = b.op("Gather", [wpe, pos], axis=0)
    with b.scope("embedding"):
        x = b.op("Add", [tok, pe])
    mask = b.causal_mask(ids)
    for i in range(c.layers):
        with b.scope(f"layers.{i}"):
            y = b.layer_norm(x, "input_layernorm", h, c.norm_eps)
            with b.scope("self_attention"):
                qkv = b.linear(y, "query_key_value", h, 3 * h)
                q, k, v = b.op("Split", [qkv, b.i64([h, h, h])], outputs=3,
                               axis=-1)
                q = b.split_heads(q, nh, hd)
                kt = b.split_heads(k, nh, hd, perm=(0, 2, 3, 1))
                v = b.split_heads(v, nh, hd)
                a = b.sdpa(q, kt, v, hd, mask)
                a = b.merge_heads(a, h)
                a = b.linear(a, "dense", h, h)
            x = b.op("Add", [x, a])
            y = b.layer_norm(x, "post_attention_layernorm", h, c.norm_eps)
            with b.scope("mlp"):
                if c.experts:
                    m = b.moe(y, c, "router", "experts",
                              ("dense_h_to_4h", "dense_4h_to_h"))
                else:
                    m = b.linear(y, "dense_h_to_4h", h, c.ffn)
                    m = b.gelu(m)
                    m = b.linear(m, "dense_4h_to_h", c.ffn, h)
            x = b.op("Add", [x, m])
    x = b.layer_norm(x, "final_layernorm", h, c.norm_eps)
    with b.scope("output_layer"):
        if c.tied:
            wt = b.op("Transpose", [wte], perm=[1, 0])
        else:  # Megatron-Core's default: an output layer of its own
            wt = b.param("weight", [h, c.vocab])
        b.op("MatMul", [x, wt], outputs=["logits"])
    e = b.elem
    return ([vinfo("input_ids", TensorProto.INT64, ["batch", "seq"])],
            [vinfo("logits", e, ["batch", "seq", c.vocab])])


def rotary_tables(c, hd):
    # HF LlamaRotaryEmbedding: cat(freqs, freqs), freqs = pos * theta^(-2i/d)
    inv = 1.0 / (c.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    t = np.arange(c.max_pos, dtype=np.float64)
    freqs = np.outer(t, inv)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def build_llama(b, c):
    """HF LLaMA-family decoder: RMSNorm, rotary, SwiGLU, GQA; Qwen3 adds
    QK-norm; Mixtral / DeepSeek replace the MLP by MoE."""
    h, nh, kv, hd = c.hidden, c.heads, c.kvh, c.hd
    rep = nh // kv
    ids = "input_ids"
    with b.scope("embed_tokens"):
        emb = b.param("weight", [c.vocab, h], "embedding")
        x = b.op("Gather", [emb, ids], axis=0)
    with b.scope("rotary_emb"):
        cos_t, sin_t = (rotary_tables(c, hd) if b.with_weights
                        else (None, None))
        cos_w = b.param("cos_cached", [c.max_pos, hd], data=cos_t)
        sin_w = b.param("sin_cached", [c.max_pos, hd], data=sin_t)
        s = b.dim(ids, 1)
        cos = b.op("Slice", [cos_w, b.i64([0]), s, b.i64([0])])   # [s, hd]
        sin = b.op("Slice", [sin_w, b.i64([0]), s, b.i64([0])])
    mask = b.causal_mask(ids)

    def rope(t):
        # t * cos + rotate_half(t) * sin, rotate_half = cat(-x2, x1)
        half = hd // 2
        x1 = b.op("Slice", [t, b.i64([0]), b.i64([half]), b.i64([-1])])
        x2 = b.op("Slice", [t, b.i64([half]), b.i64([2**63 - 1]),
                            b.i64([-1])])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [t, cos]), b.op("Mul", [rot, sin])])

    def heads(t, n, norm):
        bd = b.dim(t, 0)
        sd = b.dim(t, 1)
        t = b.reshape(t, [bd, sd, n, hd])                 # [b, s, n, hd]
        if norm:
            t = b.rms_norm(t, norm, hd, c.norm_eps)
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])  # [b, n, s, hd]

    def repeat_kv(t):
        # HF repeat_kv: t[:, :, None].expand(b, kv, rep, s, hd).reshape(...)
        if rep == 1:
            return t
        bd, sd = b.dim(t, 0), b.dim(t, 2)
        u = b.op("Unsqueeze", [t, b.i64([2])])
        shape = b.op("Concat", [bd, b.i64([kv]), b.i64([rep]), sd,
                                b.i64([hd])], axis=0)
        u = b.op("Expand", [u, shape])
        bd2, sd2 = b.dim(t, 0), b.dim(t, 2)
        return b.reshape(u, [bd2, nh, sd2, hd])

    def swiglu(t, ffn, module):
        with b.scope(module):
            g = b.silu(b.linear(t, "gate_proj", h, ffn, bias=False))
            u = b.linear(t, "up_proj", h, ffn, bias=False)
            return b.linear(b.op("Mul", [g, u]), "down_proj", ffn, h,
                            bias=False)

    for i in range(c.layers):
        with b.scope(f"layers.{i}"):
            y = b.rms_norm(x, "input_layernorm", h, c.norm_eps)
            with b.scope("self_attn"):
                q = b.linear(y, "q_proj", h, nh * hd, bias=False)
                k = b.linear(y, "k_proj", h, kv * hd, bias=False)
                v = b.linear(y, "v_proj", h, kv * hd, bias=False)
                q = heads(q, nh, "q_norm" if c.qk_norm else None)
                k = heads(k, kv, "k_norm" if c.qk_norm else None)
                v = heads(v, kv, None)
                q, k = rope(q), rope(k)
                k, v = repeat_kv(k), repeat_kv(v)
                kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
                a = b.sdpa(q, kt, v, hd, mask)
                a = b.merge_heads(a, nh * hd)
                a = b.linear(a, "o_proj", nh * hd, h, bias=False)
            x = b.op("Add", [x, a])
            y = b.rms_norm(x, "post_attention_layernorm", h, c.norm_eps)
            if c.experts and i >= c.dense_layers:
                # DeepSeek: mlp.{gate, experts, shared_experts}
                if c.shared_ffn:
                    with b.scope("mlp"):
                        m = b.moe(y, c, "gate", "experts",
                                  ("gate_proj", "up_proj", "down_proj"))
                        sh = swiglu(y, c.shared_ffn, "shared_experts")
                        m = b.op("Add", [m, sh])
                else:  # Mixtral: block_sparse_moe.{gate, experts}
                    with b.scope("block_sparse_moe"):
                        m = b.moe(y, c, "gate", "experts",
                                  ("w1", "w3", "w2"))
            else:
                m = swiglu(y, c.ffn, "mlp")
            x = b.op("Add", [x, m])
    x = b.rms_norm(x, "norm", h, c.norm_eps)
    with b.scope("lm_head"):
        if c.tied:
            w = b.op("Transpose", [emb], perm=[1, 0])
        else:
            w = b.param("weight", [h, c.vocab])
        b.op("MatMul", [x, w], outputs=["logits"])
    return ([vinfo("input_ids", TensorProto.INT64, ["batch", "seq"])],
            [vinfo("logits", b.elem, ["batch", "seq", c.vocab])])


def encoder_attention(b, x, c, mask, qkv_fused):
    """Bidirectional self-attention of BERT (separate q/k/v) or ViT (fused
    qkv, timm reshape [B, N, 3, heads, C // heads] with C // heads computed
    at run time)."""
    h, nh, hd = c.hidden, c.heads, c.hd
    if qkv_fused:
        qkv = b.linear(x, "qkv", h, 3 * h)
        bd, nd, cd = (b.dim(x, 0), b.dim(x, 1),
                      b.dim(x, 2, unsqueeze=False))
        per_head = b.op("Div", [cd, b.i64(nh)])
        per_head = b.op("Unsqueeze", [per_head, b.i64([0])])
        t = b.reshape(qkv, [bd, nd, 3, nh, per_head])
        t = b.op("Transpose", [t], perm=[2, 0, 3, 1, 4])
        q, k, v = (b.op("Gather", [t, b.i64(j)], axis=0) for j in range(3))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        a = b.sdpa(q, kt, v, hd, mask)
        return b.linear(b.merge_heads(a, h), "proj", h, h)
    with b.scope("self"):
        q = b.split_heads(b.linear(x, "query", h, h), nh, hd)
        kt = b.split_heads(b.linear(x, "key", h, h), nh, hd,
                           perm=(0, 2, 3, 1))
        v = b.split_heads(b.linear(x, "value", h, h), nh, hd)
        a = b.merge_heads(b.sdpa(q, kt, v, hd, mask), h)
    return a


def build_bert(b, c):
    """HF BertModel: word + position + token-type embeddings, LN; post-LN
    encoder layers; pooler (first token, Gemm, Tanh)."""
    h = c.hidden
    with b.scope("embeddings"):
        with b.scope("word_embeddings"):
            we = b.op("Gather", [b.param("weight", [c.vocab, h], "embedding"),
                                 "input_ids"], axis=0)
        # position_ids buffer [1, max_pos] (a Constant here, not a parameter)
        # sliced to [:, :seq]
        pid = b.op("Constant", [], value=helper.make_tensor(
            "value", TensorProto.INT64, [1, c.max_pos],
            list(range(c.max_pos))))
        s = b.dim("input_ids", 1)
        pid = b.op("Slice", [pid, b.i64([0]), s, b.i64([1])])
        with b.scope("position_embeddings"):
            pe = b.op("Gather", [b.param("weight", [c.max_pos, h],
                                         "embedding"), pid], axis=0)
        with b.scope("token_type_embeddings"):
            te = b.op("Gather", [b.param("weight", [c.type_vocab, h],
                                         "embedding"), "token_type_ids"],
                      axis=0)
        x = b.op("Add", [b.op("Add", [we, te]), pe])
        x = b.layer_norm(x, "LayerNorm", h, c.norm_eps)
    # extended attention mask: (1 - mask[:, None, None, :]) * float min
    m = b.op("Unsqueeze", ["attention_mask", b.i64([1, 2])])
    m = b.op("Cast", [m], to=b.elem)
    m = b.op("Sub", [b.fconst(1.0), m])
    mask = b.op("Mul", [m, b.fconst(FLOAT_MIN[b.dtype])])
    for i in range(c.layers):
        with b.scope("encoder", f"layer.{i}"):
            with b.scope("attention"):
                a = encoder_attention(b, x, c, mask, qkv_fused=False)
                with b.scope("output"):
                    a = b.linear(a, "dense", h, h)
                    x = b.layer_norm(b.op("Add", [a, x]), "LayerNorm", h,
                                     c.norm_eps)
            with b.scope("intermediate"):
                m = b.gelu(b.linear(x, "dense", h, c.ffn))
            with b.scope("output"):
                m = b.linear(m, "dense", c.ffn, h)
                x = b.layer_norm(b.op("Add", [m, x]), "LayerNorm", h,
                                 c.norm_eps)
    x = b.op("Identity", [x], outputs=["last_hidden_state"])
    with b.scope("pooler"):
        first = b.op("Gather", [x, b.i64(0)], axis=1)               # [b, h]
        p = b.gemm(first, "dense", h, h)
        b.op("Tanh", [p], outputs=["pooler_output"])
    i64 = TensorProto.INT64
    return ([vinfo("input_ids", i64, ["batch", "seq"]),
             vinfo("token_type_ids", i64, ["batch", "seq"]),
             vinfo("attention_mask", i64, ["batch", "seq"])],
            [vinfo("last_hidden_state", b.elem, ["batch", "seq", h]),
             vinfo("pooler_output", b.elem, ["batch", h])])


def build_vit(b, c):
    """timm VisionTransformer: Conv patch embedding, class token, learned
    positions, pre-LN blocks (fused qkv), final LN, linear head on the
    class token."""
    h = c.hidden
    n = (c.image // c.patch) ** 2
    px = "pixel_values"
    with b.scope("patch_embed", "proj"):
        w = b.param("weight", [h, c.channels, c.patch, c.patch], "conv")
        bias = b.param("bias", [h], "bias")
        y = b.op("Conv", [px, w, bias], kernel_shape=[c.patch, c.patch],
                 strides=[c.patch, c.patch], pads=[0, 0, 0, 0],
                 dilations=[1, 1], group=1)                      # [b,h,g,g]
    with b.scope("patch_embed"):
        # x.flatten(2): Reshape to Concat(Shape(x)[0:2], [-1])
        sh = b.op("Shape", [y])
        head = b.op("Slice", [sh, b.i64([0]), b.i64([2]), b.i64([0])])
        y = b.op("Reshape", [y, b.op("Concat", [head, b.i64([-1])], axis=0)])
        x = b.op("Transpose", [y], perm=[0, 2, 1])               # [b, n, h]
    cls = b.param_abs("cls_token", [1, 1, h], "embedding")
    bd = b.dim(x, 0)
    cls = b.op("Expand", [cls, b.op("Concat", [bd, b.i64([1]), b.i64([h])],
                                     axis=0)])
    x = b.op("Concat", [cls, x], axis=1)                         # [b, n+1, h]
    x = b.op("Add", [x, b.param_abs("pos_embed", [1, n + 1, h], "embedding")])
    for i in range(c.layers):
        with b.scope(f"blocks.{i}"):
            y = b.layer_norm(x, "norm1", h, c.norm_eps)
            with b.scope("attn"):
                a = encoder_attention(b, y, c, None, qkv_fused=True)
            x = b.op("Add", [x, a])
            y = b.layer_norm(x, "norm2", h, c.norm_eps)
            with b.scope("mlp"):
                m = b.gelu(b.linear(y, "fc1", h, c.ffn))
                m = b.linear(m, "fc2", c.ffn, h)
            x = b.op("Add", [x, m])
    x = b.layer_norm(x, "norm", h, c.norm_eps)
    first = b.op("Gather", [x, b.i64(0)], axis=1)                # [b, h]
    with b.scope("head"):
        w = b.param("weight", [c.classes, h], "gemm")
        bias = b.param("bias", [c.classes], "bias")
        b.op("Gemm", [first, w, bias], outputs=["logits"], alpha=1.0,
             beta=1.0, transB=1)
    return ([vinfo(px, b.elem, ["batch", c.channels, c.image, c.image])],
            [vinfo("logits", b.elem, ["batch", c.classes])])


def build_dlrm(b, c):
    """DLRM (facebookresearch/dlrm names): bottom MLP on dense features,
    one embedding lookup per sparse feature, dot interaction (BatchMatMul of
    the stacked features with their transpose, strict lower triangle via
    Gather), top MLP, sigmoid."""
    d = c.emb_dim

    def mlp(x, module, din, widths, last_sigmoid):
        for j, w in enumerate(widths):
            x = b.gemm(x, f"{module}.{2 * j}", din, w)
            last = j == len(widths) - 1
            with b.scope(f"{module}.{2 * j + 1}"):
                x = b.op("Sigmoid" if last and last_sigmoid else "Relu", [x])
            din = w
        return x

    bot = mlp("dense_features", "bot_l", c.dense_features, c.bottom_mlp,
              False)                                             # [b, d]
    feats = [b.op("Unsqueeze", [bot, b.i64([1])])]
    for t, rows in enumerate(c.tables):
        with b.scope(f"emb_l.{t}"):
            ids = b.op("Gather", ["sparse_ids", b.i64(t)], axis=1)  # [b]
            w = b.param("weight", [rows, d], "embedding")
            e = b.op("Gather", [w, ids], axis=0)                   # [b, d]
            feats.append(b.op("Unsqueeze", [e, b.i64([1])]))
    nf = len(feats)
    with b.scope("interact"):
        tt = b.op("Concat", feats, axis=1)                         # [b, nf, d]
        z = b.op("MatMul", [tt, b.op("Transpose", [tt], perm=[0, 2, 1])])
        bd = b.dim(z, 0)
        z = b.reshape(z, [bd, nf * nf])
        li = [i * nf + j for i in range(nf) for j in range(i)]
        zl = b.op("Gather", [z, b.i64(li)], axis=1)                # [b, pairs]
        r = b.op("Concat", [bot, zl], axis=1)
    inter = len(li) + d
    y = mlp(r, "top_l", inter, c.top_mlp, True)
    b.op("Identity", [y], outputs=["click_probability"])
    return ([vinfo("dense_features", b.elem, ["batch", c.dense_features]),
             vinfo("sparse_ids", TensorProto.INT64, ["batch", len(c.tables)])],
            [vinfo("click_probability", b.elem, ["batch", c.top_mlp[-1]])])


BUILDERS = {"gpt": build_gpt, "llama": build_llama, "bert": build_bert,
            "vit": build_vit, "dlrm": build_dlrm}
