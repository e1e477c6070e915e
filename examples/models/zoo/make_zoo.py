#!/usr/bin/python3
"""Write Loom's model zoo: full-scale, shape-only ONNX graphs of published
architectures, laid out the way torch.onnx exports them.

    /usr/bin/python3 examples/models/zoo/make_zoo.py OUT_DIR
        [--only NAME[,NAME...]] [--layers N] [--with-weights]
        [--dtype float32|float16] [--no-check] [--time-limit S] [--list]
        [--moe-style einsum|unrolled|dense|indexed]

Every model is written as OUT_DIR/NAME.onnx. Its initializers are
TensorProtos with data_location EXTERNAL in OUT_DIR/NAME.weights.bin at
running (64-byte aligned) offsets, and that file is NOT written: Loom treats
absent external data as a shape-only model and plans without reading weights.
So a 1T-parameter model is a few MB of graph, written in well under a second;
no weight is ever allocated.

  --only NAME,...   only these models (default: every model in --list)
  --layers N        override the number of transformer layers (quick tests;
                    DeepSeek keeps its first layer dense, so N >= 2 has MoE)
  --with-weights    small models only (refused above 50M parameters): write
                    deterministic random weights (numpy seed 0) into
                    NAME.weights.bin, for numerical tests
  --dtype           element type of weights and activations (float32 default)
  --no-check        skip onnx.checker / shape inference of each model
  --time-limit S    exit 1 if writing all the models took more than S seconds
  --list            print the table of models, configs and parameter counts
  --moe-style S     the MoE models only, their MoE layers written as another
                    exporter writes them, as NAME-S (Builder.moe_other):
                    einsum (GShard capacity dispatch), unrolled (an expert
                    loop), dense (a loop gated by Equal(TopK index, e)),
                    indexed (HF Mixtral's NonZero routing)

Graph layout (what torch.onnx.export(opset_version=17, do_constant_folding=
True) writes for HF / Megatron / timm / DLRM modules, minus its Cast noise):

  * inputs have symbolic dims named `batch` and `seq`; IR version 8,
    opset 17, producer "loom-zoo".
  * node names follow the module path, `/layers.3/self_attn/q_proj/MatMul`,
    outputs `<node>_output_<i>`; initializers are named like the state
    dict, `layers.3.self_attn.q_proj.weight`.
  * nn.Linear on 3-D activations is MatMul with the weight stored
    [in, out] (the exporter's folded transpose, which it would name
    onnx::MatMul_N; here it keeps the state-dict name), then Add(bias); on 2-D
    activations it is Gemm(transB=1) with the weight [out, in], as torch
    exports it. Tied LM heads are Transpose(embedding) -> MatMul (folding
    would untie them).
  * runtime shape arithmetic like the exporter's: every Reshape of the
    attention block gets its shape from Shape -> Gather -> Unsqueeze ->
    Concat of the activation it reshapes; positions come from Range over
    Shape; the causal mask is ConstantOfShape -> Trilu over [seq, seq].
  * LayerNormalization (opset 17) for GPT / BERT / ViT; RMSNorm decomposed
    as Pow, ReduceMean, Add, Sqrt, Div, Mul, Mul (HF LlamaRMSNorm) for
    LLaMA / Qwen / Mixtral / DeepSeek.
  * rotary embeddings (HF rotate_half): cos/sin tables [max_pos, head_dim]
    are initializers (`rotary_emb.cos_cached`, `.sin_cached`), Sliced to
    [seq, head_dim]; rotate_half is Slice, Slice, Neg, Concat. The tables
    are counted as parameters (they are buffers in HF; < 0.2 % of any model
    here).
  * GELU is exact (Div, Erf, Add, Mul, Mul: opset 17 has no Gelu); SwiGLU is
    Mul(gate, Sigmoid(gate)) * up.
  * GQA: K/V projections with kv_heads heads, then HF repeat_kv: Unsqueeze
    -> Expand [b, kv, rep, s, d] -> Reshape [b, heads, s, d].
  * MoE (a static-shape, capacity-based dispatch a planner can recognise;
    the simplification of Mixtral's dropless routing is that tokens beyond
    an expert's capacity are dropped, as in GShard/Switch/Megatron):
        x [T, d] -> router MatMul [d, E] -> Softmax -> TopK(k) ->
        (renormalise) -> ScatterElements into zeros [T, E] = gates ->
        Transpose [E, T] -> TopK(C) per expert (C = min(T, ceil(T*k*1.25/E)),
        computed from Shape at run time) -> Gather tokens [E, C, d] ->
        batched MatMul with STACKED expert weights [E, d, f] / [E, f, d] ->
        Mul by gate -> ScatterND(reduction=add) back into [T, d].
    Expert weights are one initializer per projection, e.g.
    `layers.3.block_sparse_moe.experts.w1.weight` [E, d, f]. DeepSeek adds
    a shared-expert SwiGLU MLP on the same input. A token an expert drops
    (or a slot filled with a token that did not choose it) has gate 0, so
    it contributes nothing; with capacity_factor = E/k (C = T) the layer
    computes exactly the dropless top-k MoE.
  * BERT's position_ids buffer is a Constant node (not a parameter); DLRM's
    sparse features are single-hot (one Gather per table, no EmbeddingBag).

With --with-weights every model runs in ONNX Runtime (checked against a
numpy reference of each architecture while this was written); in float16
the MoE models do not, because ORT's CPU ScatterND has no float16 'add'.

Published configurations and counts are in MODELS below, with sources.
Each generated model is checked (onnx.checker.check_model — run against an
empty stand-in weights file in a scratch directory, because the checker of
ONNX 1.12 fails on a missing external-data file — and
onnx.shape_inference.infer_shapes(strict_mode=True) on the model proto,
symbolic dims left symbolic), and its initializer count must equal the
count computed from the configuration.

Only onnx + numpy + the standard library (no torch).
"""

import sys

sys.dont_write_bytecode = True  # keep examples/models free of __pycache__

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "loom-zoo"
WITH_WEIGHTS_LIMIT = 50_000_000
ALIGN = 64  # byte alignment of each tensor in the (virtual) weights file

DTYPES = {
    "float32": (TensorProto.FLOAT, 4, np.float32),
    "float16": (TensorProto.FLOAT16, 2, np.float16),
}
FLOAT_MIN = {"float32": float(np.finfo(np.float32).min),
             "float16": float(np.finfo(np.float16).min)}


# --------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    family: str            # gpt | llama | bert | vit | dlrm
    source: str = ""       # where the configuration is published
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0      # 0: = heads
    head_dim: int = 0      # 0: hidden // heads
    ffn: int = 0
    vocab: int = 0
    max_pos: int = 0       # learned positions, or length of rotary tables
    seq: int = 2048        # the --seq a planning run binds
    batch: int = 8         # the --batch a planning run binds
    norm_eps: float = 1e-5
    rope_theta: float = 1e4
    qk_norm: bool = False  # Qwen3: RMSNorm on q and k per head
    tied: bool = False     # LM head tied to the token embedding
    # MoE
    experts: int = 0       # routed experts per MoE layer (0: dense)
    top_k: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0    # DeepSeek shared experts (their total width)
    dense_layers: int = 0  # leading dense layers (DeepSeek: 1)
    normalize_topk: bool = True
    capacity_factor: float = 1.25
    moe_style: str = "capacity"  # how the MoE layer is written: MOE_STYLES
    # encoders
    type_vocab: int = 0    # BERT segment embeddings
    image: int = 0         # ViT
    patch: int = 0
    channels: int = 3
    classes: int = 0
    # DLRM
    dense_features: int = 0
    emb_dim: int = 0
    tables: tuple = ()
    bottom_mlp: tuple = ()
    top_mlp: tuple = ()
    # published total parameter count, and the unit it was rounded to
    published: float = 0.0
    published_rounding: float = 0.0
    published_note: str = ""
    full_scale: bool = True

    @property
    def kvh(self):
        return self.kv_heads or self.heads

    @property
    def hd(self):
        return self.head_dim or self.hidden // self.heads


MEGATRON = ("Narayanan et al. 2021, 'Efficient Large-Scale Language Model "
            "Training on GPU Clusters Using Megatron-LM', Table 1")


def gpt3(name, hidden, heads, layers, published, rounding=1e8,
         source=MEGATRON, note=""):
    # Megatron GPT: vocab 51200 (GPT-2 BPE padded), 2048 learned positions,
    # FFN 4h, biases, pre-LayerNorm, LM head tied to the word embeddings.
    # The paper's count: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)),
    # which is exactly this graph minus the final LayerNorm (2h).
    return Config(name=name, family="gpt", source=source, layers=layers,
                  hidden=hidden, heads=heads, ffn=4 * hidden, vocab=51200,
                  max_pos=2048, tied=True, published=published,
                  published_rounding=rounding, published_note=note)


DLRM_SMALL_TABLES = (3, 4, 10, 15, 24, 27, 105, 305, 583, 633, 1460, 2173,
                     5652, 12517, 14992, 93145, 286181, 2202608)

MODELS = [
    # GPT-3 family as trained in Megatron-LM (Table 1: params in billions
    # rounded to 0.1, heads, hidden, layers).
    gpt3("gpt3-1.7b", 2304, 24, 24, 1.7e9,
         note="Table 1 rounds to 0.1B: 1.7B stands for [1.65B, 1.75B); the "
              "paper's own formula gives 1.652B"),
    gpt3("gpt3-3.6b", 3072, 32, 30, 3.6e9,
         note="Table 1 rounds to 0.1B; formula: 3.562B"),
    gpt3("gpt3-7.5b", 4096, 32, 36, 7.5e9),
    gpt3("gpt3-18b", 6144, 48, 40, 18.4e9),
    gpt3("gpt3-39b", 8192, 64, 48, 39.1e9),
    gpt3("gpt3-76b", 10240, 80, 60, 76.1e9),
    gpt3("gpt3-145b", 12288, 96, 80, 145.6e9),
    gpt3("gpt3-175b", 12288, 96, 96, 175e9, rounding=1e9,
         source="Brown et al. 2020, 'Language Models are Few-Shot Learners', "
                "Table 2.1 (d_model 12288, 96 layers, 96 heads); vocab "
                "padded to 51200 as in Megatron"),
    gpt3("gpt3-310b", 16384, 128, 96, 310.1e9),
    gpt3("gpt3-530b", 20480, 128, 105, 529.6e9),
    gpt3("gpt3-1t", 25600, 160, 128, 1008.0e9),
    # LLaMA-2 (Touvron et al. 2023, Table 1 / HF config.json): RMSNorm,
    # rotary, SwiGLU, untied head, vocab 32000, context 4096.
    Config(name="llama2-7b", family="llama",
           source="Touvron et al. 2023 (Llama 2), HF meta-llama/Llama-2-7b-hf "
                  "config.json",
           layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000,
           max_pos=4096, norm_eps=1e-5, published=6_738_415_616,
           published_note="exact count of the released checkpoint (the "
                          "paper's '7B')"),
    Config(name="llama2-13b", family="llama",
           source="Touvron et al. 2023 (Llama 2), HF Llama-2-13b-hf",
           layers=40, hidden=5120, heads=40, ffn=13824, vocab=32000,
           max_pos=4096, published=13_015_864_320,
           published_note="exact count of the released checkpoint"),
    Config(name="llama2-70b", family="llama",
           source="Touvron et al. 2023 (Llama 2), HF Llama-2-70b-hf "
                  "(GQA, 8 KV heads)",
           layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672,
           vocab=32000, max_pos=4096, published=68_976_648_192,
           published_note="exact count of the released checkpoint (the "
                          "paper's '70B')"),
    # Llama 3.1 405B (Llama Team 2024, "The Llama 3 Herd of Models", Table
    # 3; HF meta-llama/Llama-3.1-405B config.json): 126 layers, 16384, 128
    # heads, 8 KV heads, FFN 53248, vocab 128256, rope theta 5e5, rotary
    # tables of 131072 (its 128K context).
    Config(name="llama3-405b", family="llama",
           source="Llama Team 2024, 'The Llama 3 Herd of Models', Table 3; "
                  "HF meta-llama/Llama-3.1-405B config.json (GQA, 8 KV heads)",
           layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248,
           vocab=128256, max_pos=131072, rope_theta=5e5, published=405e9,
           published_rounding=1e9,
           published_note="paper: 405B parameters"),
    # Qwen3-8B (Qwen team 2025, HF Qwen/Qwen3-8B config.json): GQA 32/8,
    # head_dim 128, QK-RMSNorm, untied head, rope tables of 32768.
    Config(name="qwen3-8b", family="llama",
           source="Qwen3 technical report 2025, HF Qwen/Qwen3-8B config.json",
           layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128,
           ffn=12288, vocab=151936, max_pos=32768, norm_eps=1e-6,
           rope_theta=1e6, qk_norm=True, published=8.2e9,
           published_rounding=1e8,
           published_note="model card: 8.2B total, 6.95B non-embedding"),
    # Mixtral 8x7B (Jiang et al. 2024, HF mistralai/Mixtral-8x7B-v0.1).
    Config(name="mixtral-8x7b", family="llama",
           source="Jiang et al. 2024, 'Mixtral of Experts'; HF "
                  "mistralai/Mixtral-8x7B-v0.1 config.json",
           layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
           vocab=32000, max_pos=32768, rope_theta=1e6, experts=8, top_k=2,
           expert_ffn=14336, published=46_702_792_704,
           published_note="exact count of the released checkpoint ('46.7B')"),
    # DeepSeekMoE 16B (Dai et al. 2024, HF deepseek-ai/deepseek-moe-16b-base):
    # 28 layers, hidden 2048, 16 heads (MHA, head_dim 128), vocab 102400;
    # layer 0 dense (FFN 10944); layers 1-27: 64 routed experts of FFN 1408,
    # top-6 (not renormalised), + 2 shared experts (one SwiGLU of 2 x 1408).
    Config(name="deepseek-moe-16b", family="llama",
           source="Dai et al. 2024, 'DeepSeekMoE'; HF "
                  "deepseek-ai/deepseek-moe-16b-base config.json",
           layers=28, hidden=2048, heads=16, ffn=10944, vocab=102400,
           max_pos=4096, norm_eps=1e-6, experts=64, top_k=6,
           expert_ffn=1408, shared_ffn=2 * 1408, dense_layers=1,
           normalize_topk=False, published=16.4e9, published_rounding=1e8,
           published_note="paper: 16.4B total parameters"),
    # 10T-class MoE (Loom's own configuration, no published model): a
    # GPT-3-175B-wide decoder (h 12288, 96 heads, learned positions, tied
    # head) whose 64 layers are all MoE: 128 experts of a GELU MLP
    # 12288 -> 49152 -> 12288 (no expert biases), top-2. Total 9.935T
    # (-0.65 % of 10T).
    Config(name="moe-10t", family="gpt",
           source="Loom's 10T-class MoE: 64 MoE layers x 128 experts, "
                  "h 12288, top-2 (own configuration)",
           layers=64, hidden=12288, heads=96, ffn=4 * 12288, vocab=51200,
           max_pos=2048, tied=True, experts=128, top_k=2,
           expert_ffn=4 * 12288, published=10e12, published_rounding=0,
           published_note="nominal 10T (own configuration)"),
    # BERT-large (Devlin et al. 2019): 24 layers, 1024, 16 heads, FFN 4096,
    # uncased vocab 30522, 512 positions, 2 segments, pooler; post-LN.
    Config(name="bert-large", family="bert",
           source="Devlin et al. 2019 (BERT), HF bert-large-uncased",
           layers=24, hidden=1024, heads=16, ffn=4096, vocab=30522,
           max_pos=512, type_vocab=2, seq=512, norm_eps=1e-12,
           published=335_141_888,
           published_note="exact count of bert-large-uncased BertModel; the "
                          "paper's '340M' is rounded (1.4 % higher)"),
    # ViT-L/16 (Dosovitskiy et al. 2021, Table 1; timm vit_large_patch16_224).
    Config(name="vit-l16", family="vit",
           source="Dosovitskiy et al. 2021 (ViT), Table 1; timm "
                  "vit_large_patch16_224",
           layers=24, hidden=1024, heads=16, ffn=4096, image=224, patch=16,
           classes=1000, batch=64, seq=0, norm_eps=1e-6,
           published=304_326_632,
           published_note="timm vit_large_patch16_224 (paper Table 1: 307M, "
                          "0.9 % higher)"),
    # DLRM-style recommender (Naumov et al. 2019 architecture, Loom's own
    # sizes): 13 dense features, bottom MLP 13-512-256-128, 26 single-hot
    # sparse features: 8 tables of 10^8 rows and 18 Criteo-like small ones,
    # dim 128, dot interaction (strict lower triangle, 351 pairs), top MLP
    # 479-1024-1024-512-256-1, sigmoid.
    Config(name="dlrm-1e8", family="dlrm",
           source="Naumov et al. 2019 (DLRM) architecture; own sizes: "
                  "8 x 10^8-row tables",
           dense_features=13, emb_dim=128,
           tables=(100_000_000,) * 8 + DLRM_SMALL_TABLES,
           bottom_mlp=(512, 256, 128), top_mlp=(1024, 1024, 512, 256, 1),
           batch=2048, seq=0, published=0.0,
           published_note="own configuration (no published count)"),
]

# Small versions of each architecture: same graph layout, tiny sizes, so
# they can carry real weights (--with-weights) for numerical tests.
TINY = [
    Config(name="gpt3-tiny", family="gpt", layers=2, hidden=64, heads=4,
           ffn=256, vocab=256, max_pos=128, tied=True, seq=16, batch=2,
           full_scale=False),
    Config(name="llama2-tiny", family="llama", layers=2, hidden=64, heads=4,
           ffn=172, vocab=256, max_pos=128, seq=16, batch=2,
           full_scale=False),
    Config(name="llama2-gqa-tiny", family="llama", layers=2, hidden=64,
           heads=4, kv_heads=2, ffn=172, vocab=256, max_pos=128, seq=16,
           batch=2, full_scale=False),
    Config(name="qwen3-tiny", family="llama", layers=2, hidden=64, heads=4,
           kv_heads=2, head_dim=32, ffn=192, vocab=256, max_pos=128,
           norm_eps=1e-6, qk_norm=True, seq=16, batch=2, full_scale=False),
    Config(name="mixtral-tiny", family="llama", layers=2, hidden=64,
           heads=4, kv_heads=2, ffn=128, vocab=256, max_pos=128, experts=4,
           top_k=2, expert_ffn=128, seq=16, batch=2, full_scale=False),
    Config(name="deepseek-moe-tiny", family="llama", layers=3, hidden=64,
           heads=4, ffn=256, vocab=256, max_pos=128, experts=8, top_k=3,
           expert_ffn=32, shared_ffn=64, dense_layers=1,
           normalize_topk=False, seq=16, batch=2, full_scale=False),
    Config(name="moe-tiny", family="gpt", layers=2, hidden=64, heads=4,
           ffn=256, vocab=256, max_pos=128, tied=True, experts=4, top_k=2,
           expert_ffn=128, seq=16, batch=2, full_scale=False),
    Config(name="bert-tiny", family="bert", layers=2, hidden=64, heads=4,
           ffn=256, vocab=256, max_pos=64, type_vocab=2, seq=16, batch=2,
           norm_eps=1e-12, full_scale=False),
    Config(name="vit-tiny", family="vit", layers=2, hidden=64, heads=4,
           ffn=256, image=32, patch=8, classes=10, batch=2, seq=0,
           norm_eps=1e-6, full_scale=False),
    Config(name="dlrm-tiny", family="dlrm", dense_features=13, emb_dim=16,
           tables=(1000, 1000, 10, 50), bottom_mlp=(64, 16),
           top_mlp=(64, 32, 1), batch=8, seq=0, full_scale=False),
]

# Full-scale shapes of published training runs that test/validation/
# compares Loom's predictions with (not in the default set; --only NAME).
# Each source is the run's own table; see test/validation/runs.csv.
KORTHIKANTI = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation "
               "in Large Transformer Models', Table 3")
MCORE_H100 = ("Megatron-LM README (commit f2e5db4, 2024-07), "
              "images/model_table.png: GPT, vocab 131072, seq 4096, untied")


def mcore_gpt(name, hidden, heads, layers, published):
    # Megatron-Core GPT as in the H100 weak-scaling table: FFN 4h, untied
    # output layer, vocab 131072, seq 4096 (learned positions stand in for
    # whatever position embedding the runs used: no FLOPs either way).
    return Config(name=name, family="gpt", source=MCORE_H100, layers=layers,
                  hidden=hidden, heads=heads, ffn=4 * hidden, vocab=131072,
                  max_pos=4096, seq=4096, tied=False, published=published,
                  published_rounding=published * 0.1)


def llama1(name, layers, hidden, heads, ffn, published):
    # LLaMA (Touvron et al. 2023a, Table 2): vocab 32000, context 2048.
    return Config(name=name, family="llama",
                  source="Touvron et al. 2023, 'LLaMA', Table 2; MindSpeed-LLM "
                         "examples/llama/pretrain_llama_*_ptd.sh",
                  layers=layers, hidden=hidden, heads=heads, ffn=ffn,
                  vocab=32000, max_pos=2048, published=published,
                  published_rounding=published * 0.1)


VALIDATION = [
    gpt3("gpt3-22b", 6144, 64, 48, 22e9, rounding=2e9, source=KORTHIKANTI),
    mcore_gpt("mcore-gpt-1.7b", 2048, 16, 24, 1.7e9),
    mcore_gpt("mcore-gpt-7.1b", 4096, 32, 30, 7.1e9),
    mcore_gpt("mcore-gpt-16b", 6144, 48, 32, 16e9),
    mcore_gpt("mcore-gpt-32b", 7168, 56, 48, 32e9),
    mcore_gpt("mcore-gpt-70b", 8192, 64, 84, 70e9),
    mcore_gpt("mcore-gpt-119b", 10240, 80, 92, 119e9),
    mcore_gpt("mcore-gpt-177b", 12288, 96, 96, 177e9),
    mcore_gpt("mcore-gpt-314b", 16384, 128, 96, 314e9),
    mcore_gpt("mcore-gpt-462b", 18432, 144, 112, 462e9),
    llama1("llama-7b", 32, 4096, 32, 11008, 6.7e9),
    llama1("llama-13b", 40, 5120, 40, 13824, 13.0e9),
    llama1("llama-33b", 60, 6656, 52, 17920, 32.5e9),
    llama1("llama-65b", 80, 8192, 64, 22016, 65.2e9),
    # CodeLlama-34B's shape as MindSpeed-LLM's llama2 34B script gives it
    # (48 layers, h 8192, 64 heads, 8 KV groups, FFN 22016).
    Config(name="llama2-34b", family="llama",
           source="MindSpeed-LLM examples/mcore/llama2/"
                  "pretrain_llama2_34B_ptd_16p.sh; HF codellama/"
                  "CodeLlama-34b-hf",
           layers=48, hidden=8192, heads=64, kv_heads=8, ffn=22016,
           vocab=32000, max_pos=4096, published=33.7e9,
           published_rounding=1e9),
    # Qwen3-30B-A3B (HF Qwen/Qwen3-30B-A3B config.json): 48 layers, h 2048,
    # 32 heads / 4 KV of head_dim 128, QK-norm, 128 experts of FFN 768,
    # top-8 (renormalised), no shared expert, vocab 151936, untied. Qwen3
    # routes dropless (HF's Qwen3MoeSparseMoeBlock, DeepEP in the measured
    # run): capacity factor 1.0 sizes each expert at the mean load T k / E
    # rather than padding to GShard's 1.25.
    Config(name="qwen3-30b-a3b", family="llama",
           source="Qwen3 technical report 2025; HF Qwen/Qwen3-30B-A3B "
                  "config.json",
           layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
           ffn=768, vocab=151936, max_pos=4096, norm_eps=1e-6,
           rope_theta=1e6, qk_norm=True, experts=128, top_k=8,
           expert_ffn=768, seq=4096, published=30.5e9, capacity_factor=1.0,
           published_rounding=1e9,
           published_note="model card: 30.5B total, 3.3B activated"),
]

# Seed scenarios that are not in the default set (--only NAME): the DLRM
# of issue 17 whose eight 10^9-row tables (1.9 TiB each with training
# state, ~15 TiB in all) no single card holds, so they are sharded.
SCENARIOS = [
    Config(name="dlrm-1e9", family="dlrm",
           source="Naumov et al. 2019 (DLRM) architecture; own sizes: "
                  "8 x 10^9-row tables (issue 17 seed)",
           dense_features=13, emb_dim=128,
           tables=(1_000_000_000,) * 8 + DLRM_SMALL_TABLES,
           bottom_mlp=(512, 256, 128), top_mlp=(1024, 1024, 512, 256, 1),
           batch=2048, seq=0, published=0.0,
           published_note="own configuration (no published count)"),
]

ALL = {c.name: c for c in MODELS + TINY + VALIDATION + SCENARIOS}


# How an MoE layer is written (Builder.moe, Builder.moe_other): the default
# capacity dispatch by TopK per expert, or another exporter's writing.
MOE_STYLES = ("capacity", "einsum", "unrolled", "dense", "indexed")


def with_moe_style(cfg, style):
    """cfg written in MoE style `style`, named NAME-STYLE (models without
    experts are refused by main)."""
    if style is None or style == "capacity":
        return cfg
    return dataclasses.replace(cfg, name=f"{cfg.name}-{style}",
                               moe_style=style)


def with_layers(cfg, layers):
    if layers is None or cfg.family == "dlrm":
        return cfg
    if layers < 1:
        raise SystemExit("make_zoo: --layers must be >= 1")
    if layers == cfg.layers:
        return cfg
    # no longer the published model: its count is the configuration's only
    return dataclasses.replace(cfg, layers=layers, full_scale=False)


# --------------------------------------------------------------------------
# Parameter counts from the configuration (the graph must agree exactly)
# --------------------------------------------------------------------------

def expected_params(c):
    h = c.hidden
    if c.family == "gpt":
        attn = 4 * h * h + 4 * h
        norms = 4 * h
        if c.experts:
            mlp = h * c.experts + 2 * c.experts * h * c.expert_ffn
        else:
            mlp = 2 * h * c.ffn + c.ffn + h
        per_layer = attn + norms + mlp
        emb = c.vocab * h + c.max_pos * h
        head = 0 if c.tied else c.vocab * h
        return c.layers * per_layer + emb + head + 2 * h
    if c.family == "llama":
        hd, nh, kv = c.hd, c.heads, c.kvh
        attn = h * nh * hd * 2 + h * kv * hd * 2
        norms = 2 * h + (2 * hd if c.qk_norm else 0)
        dense_mlp = 3 * h * c.ffn
        moe_mlp = (h * c.experts + 3 * c.experts * h * c.expert_ffn
                   + 3 * h * c.shared_ffn)
        n_dense = c.layers if not c.experts else min(c.dense_layers, c.layers)
        n_moe = c.layers - n_dense
        total = (c.layers * (attn + norms) + n_dense * dense_mlp
                 + n_moe * moe_mlp)
        emb = c.vocab * h * (1 if c.tied else 2)
        rotary = 2 * c.max_pos * hd
        return total + emb + h + rotary
    if c.family == "bert":
        per_layer = 4 * (h * h + h) + 2 * h * c.ffn + c.ffn + h + 4 * h
        emb = (c.vocab + c.max_pos + c.type_vocab) * h + 2 * h
        pooler = h * h + h
        return c.layers * per_layer + emb + pooler
    if c.family == "vit":
        per_layer = 4 * (h * h + h) + 2 * h * c.ffn + c.ffn + h + 4 * h
        patches = (c.image // c.patch) ** 2
        patch_embed = c.channels * c.patch * c.patch * h + h
        return (c.layers * per_layer + patch_embed + h + (patches + 1) * h
                + 2 * h + h * c.classes + c.classes)
    if c.family == "dlrm":
        def mlp(din, widths):
            n = 0
            for w in widths:
                n += din * w + w
                din = w
            return n
        nf = len(c.tables) + 1
        inter = nf * (nf - 1) // 2 + c.emb_dim
        return (sum(c.tables) * c.emb_dim + mlp(c.dense_features, c.bottom_mlp)
                + mlp(inter, c.top_mlp))
    raise ValueError(c.family)


def describe(c):
    if c.family == "dlrm":
        big = sum(1 for t in c.tables if t >= 10**8)
        return (f"{len(c.tables)} tables ({big} x 1e8 rows) dim {c.emb_dim}, "
                f"bottom {c.dense_features}-"
                + "-".join(map(str, c.bottom_mlp))
                + ", top " + "-".join(map(str, c.top_mlp)))
    if c.family == "vit":
        return (f"L{c.layers} h{c.hidden} a{c.heads} ffn{c.ffn} "
                f"img{c.image}/p{c.patch} cls{c.classes}")
    s = f"L{c.layers} h{c.hidden} a{c.heads}"
    if c.kvh != c.heads:
        s += f" kv{c.kvh}"
    if c.head_dim:
        s += f" hd{c.head_dim}"
    if c.experts:
        s += f" E{c.experts} top{c.top_k} effn{c.expert_ffn}"
        if c.shared_ffn:
            s += f" shared{c.shared_ffn}"
        if c.dense_layers:
            s += f" dense{c.dense_layers}(ffn{c.ffn})"
    else:
        s += f" ffn{c.ffn}"
    s += f" V{c.vocab}"
    return s


def published_tolerance(c, rel=0.01):
    """Allowed |count - published|: 1 %, or the published figure's rounding
    (a table that prints '1.7' billion means 1.65-1.75B) when that is wider."""
    return max(rel * c.published, c.published_rounding / 2)


# --------------------------------------------------------------------------
# Graph builder
# --------------------------------------------------------------------------

class Builder:
    def __init__(self, cfg, dtype="float32", with_weights=False, seed=0):
        self.cfg = cfg
        self.dtype = dtype
        self.elem, self.esize, self.npdt = DTYPES[dtype]
        self.with_weights = with_weights
        self.rng = np.random.default_rng(seed)
        self.location = cfg.name + ".weights.bin"
        self.nodes = []
        self.inits = []
        self.param_names = set()
        self.scopes = []
        self.counts = {}
        self.offset = 0
        self.blobs = []
        self.param_count = 0

    # -- naming -------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self, *names):
        self.scopes.extend(names)
        try:
            yield
        finally:
            del self.scopes[-len(names):]

    def _node_name(self, op):
        base = "/" + "".join(s + "/" for s in self.scopes) + op
        n = self.counts.get(base, 0)
        self.counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def op(self, op_type, inputs, outputs=1, **attrs):
        name = self._node_name(op_type)
        if isinstance(outputs, int):
            outs = [f"{name}_output_{i}" for i in range(outputs)]
        else:
            outs = list(outputs)
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name,
                                           **attrs))
        return outs[0] if len(outs) == 1 else outs

    # -- constants ----------------------------------------------------------
    def i64(self, vals):
        """Constant int64 node: scalar for an int, 1-D tensor for a list."""
        if isinstance(vals, int):
            t = helper.make_tensor("value", TensorProto.INT64, [], [vals])
        else:
            t = helper.make_tensor("value", TensorProto.INT64, [len(vals)],
                                   list(vals))
        return self.op("Constant", [], value=t)

    def fconst(self, v):
        """Constant scalar of the model's float type."""
        arr = np.array(v, dtype=self.npdt)
        t = helper.make_tensor("value", self.elem, [], arr.tobytes(),
                               raw=True)
        return self.op("Constant", [], value=t)

    def fill_value(self, v):
        """The `value` attribute of a ConstantOfShape of the float type."""
        return helper.make_tensor("value", self.elem, [1],
                                  np.array([v], dtype=self.npdt).tobytes(),
                                  raw=True)

    # -- parameters ---------------------------------------------------------
    def param(self, local, shape, init="linear", data=None):
        name = ".".join(self.scopes + [local])
        return self.param_abs(name, shape, init, data)

    def param_abs(self, name, shape, init="linear", data=None):
        assert name not in self.param_names, name
        self.param_names.add(name)
        n = math.prod(shape)
        nbytes = n * self.esize
        t = TensorProto()
        t.name = name
        t.data_type = self.elem
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(self.offset)),
                     ("length", str(nbytes))):
            e = t.external_data.add()
            e.key = k
            e.value = v
        if self.with_weights:
            arr = data if data is not None else self._random(shape, init)
            raw = np.ascontiguousarray(arr, dtype=self.npdt).tobytes()
            assert len(raw) == nbytes
            self.blobs.append((self.offset, raw))
        self.offset = -(-(self.offset + nbytes) // ALIGN) * ALIGN
        self.inits.append(t)
        self.param_count += n
        return name

    def _random(self, shape, init):
        r = self.rng
        if init == "linear":       # [.., in, out]: keeps activations O(1)
            fan_in = shape[-2] if len(shape) >= 2 else shape[0]
            return r.normal(0.0, 1.0 / math.sqrt(fan_in), shape)
        if init == "conv":         # [out, in, kh, kw]
            return r.normal(0.0, 1.0 / math.sqrt(math.prod(shape[1:])), shape)
        if init == "gemm":         # [out, in]
            return r.normal(0.0, 1.0 / math.sqrt(shape[1]), shape)
        if init == "embedding":
            return r.normal(0.0, 1.0, shape)
        if init == "norm":         # perturbed away from 1, like a checkpoint
            return 1.0 + r.normal(0.0, 0.1, shape)
        if init == "bias":
            return r.normal(0.0, 0.1, shape)
        raise ValueError(init)

    # -- common blocks ------------------------------------------------------
    def dim(self, x, i, unsqueeze=True):
        """Shape(x)[i] as the exporter writes it (a [1] tensor by default)."""
        s = self.op("Shape", [x])
        g = self.op("Gather", [s, self.i64(i)], axis=0)
        return self.op("Unsqueeze", [g, self.i64([0])]) if unsqueeze else g

    def reshape(self, x, parts):
        """Reshape x to parts: [1] int64 tensors (names) or ints."""
        items = [p if isinstance(p, str) else self.i64([p]) for p in parts]
        return self.op("Reshape", [x, self.op("Concat", items, axis=0)])

    def linear(self, x, module, din, dout, bias=True):
        with self.scope(module):
            w = self.param("weight", [din, dout])
            y = self.op("MatMul", [x, w])
            if bias:
                y = self.op("Add", [self.param("bias", [dout], "bias"), y])
        return y

    def gemm(self, x, module, din, dout):
        with self.scope(module):
            w = self.param("weight", [dout, din], "gemm")
            b = self.param("bias", [dout], "bias")
            return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def layer_norm(self, x, module, h, eps):
        with self.scope(module):
            w = self.param("weight", [h], "norm")
            b = self.param("bias", [h], "bias")
            return self.op("LayerNormalization", [x, w, b], axis=-1,
                           epsilon=eps)

    def rms_norm(self, x, module, h, eps):
        # HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight
        with self.scope(module):
            w = self.param("weight", [h], "norm")
            p = self.op("Pow", [x, self.fconst(2.0)])
            m = self.op("ReduceMean", [p], axes=[-1], keepdims=1)
            a = self.op("Add", [m, self.fconst(eps)])
            s = self.op("Sqrt", [a])
            r = self.op("Div", [self.fconst(1.0), s])
            y = self.op("Mul", [x, r])
            return self.op("Mul", [w, y])

    def gelu(self, x):
        d = self.op("Div", [x, self.fconst(math.sqrt(2.0))])
        e = self.op("Erf", [d])
        a = self.op("Add", [e, self.fconst(1.0)])
        m = self.op("Mul", [x, a])
        return self.op("Mul", [m, self.fconst(0.5)])

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    # -- attention pieces ---------------------------------------------------
    def split_heads(self, x, heads, hd, perm=(0, 2, 1, 3)):
        """[b, s, heads*hd] -> Reshape [b, s, heads, hd] -> Transpose."""
        b = self.dim(x, 0)
        s = self.dim(x, 1)
        y = self.reshape(x, [b, s, heads, hd])
        return self.op("Transpose", [y], perm=list(perm))

    def merge_heads(self, x, width):
        """[b, heads, s, hd] -> Transpose -> Reshape [b, s, width]."""
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        b = self.dim(t, 0)
        s = self.dim(t, 1)
        return self.reshape(t, [b, s, width])

    def sdpa(self, q, kt, v, hd, mask):
        """q [b,h,s,d] @ kt [b,h,d,s] / sqrt(d) (+ mask) -> softmax -> @ v."""
        sc = self.op("MatMul", [q, kt])
        sc = self.op("Div", [sc, self.fconst(math.sqrt(hd))])
        if mask is not None:
            sc = self.op("Add", [sc, mask])
        p = self.op("Softmax", [sc], axis=-1)
        return self.op("MatMul", [p, v])

    def causal_mask(self, ids):
        """[1, 1, seq, seq]: 0 on and below the diagonal, float min above."""
        with self.scope("causal_mask"):
            s = self.dim(ids, 1)
            shape = self.op("Concat", [s, s], axis=0)
            full = self.op("ConstantOfShape", [shape],
                           value=self.fill_value(FLOAT_MIN[self.dtype]))
            tri = self.op("Trilu", [full, self.i64(1)], upper=1)
            return self.op("Unsqueeze", [tri, self.i64([0, 1])])

    # -- MoE ------------------------------------------------------------------
    def moe(self, x, c, router_module, experts_module, names):
        """Capacity-based top-k MoE with stacked expert weights (see the
        module docstring), or another writing of the same layer
        (c.moe_style, MOE_STYLES). names: projection names inside
        experts_module, three for SwiGLU experts (gate, up, down: Mixtral's
        w1, w3, w2), two for GELU experts (up, down)."""
        if c.moe_style != "capacity":
            return self.moe_other(x, c, router_module, experts_module, names)
        h, E, k, f = c.hidden, c.experts, c.top_k, c.expert_ffn
        xf = self.op("Reshape", [x, self.i64([-1, h])])            # [T, h]
        with self.scope(router_module):
            wg = self.param("weight", [h, E])
            logits = self.op("MatMul", [xf, wg])                   # [T, E]
        probs = self.op("Softmax", [logits], axis=-1)
        topv, topi = self.op("TopK", [probs, self.i64([k])], outputs=2,
                             axis=-1, largest=1, sorted=1)
        if c.normalize_topk:
            denom = self.op("ReduceSum", [topv, self.i64([-1])], keepdims=1)
            topv = self.op("Div", [topv, denom])
        zeros = self.op("ConstantOfShape", [self.op("Shape", [probs])],
                        value=self.fill_value(0.0))
        gates = self.op("ScatterElements", [zeros, topi, topv], axis=1)
        gates_t = self.op("Transpose", [gates], perm=[1, 0])        # [E, T]
        # capacity C = min(T, ceil(T * k * capacity_factor / E)), computed
        # from the runtime T as the exporter would (Loom folds it).
        num, den = float(c.capacity_factor).as_integer_ratio()
        t = self.dim(xf, 0, unsqueeze=False)
        cap = self.op("Mul", [t, self.i64(k * num)])
        cap = self.op("Add", [cap, self.i64(E * den - 1)])
        cap = self.op("Div", [cap, self.i64(E * den)])
        cap = self.op("Min", [cap, t])
        cap = self.op("Unsqueeze", [cap, self.i64([0])])
        cw, ci = self.op("TopK", [gates_t, cap], outputs=2, axis=-1,
                         largest=1, sorted=1)                      # [E, C]
        xe = self.op("Gather", [xf, ci], axis=0)                   # [E, C, h]
        with self.scope(experts_module):
            if len(names) == 3:      # SwiGLU experts
                w1 = self.param(names[0] + ".weight", [E, h, f])
                w3 = self.param(names[1] + ".weight", [E, h, f])
                w2 = self.param(names[2] + ".weight", [E, f, h])
                with self.scope(names[0]):
                    g = self.op("MatMul", [xe, w1])
                g = self.silu(g)
                with self.scope(names[1]):
                    u = self.op("MatMul", [xe, w3])
                hmid = self.op("Mul", [g, u])
                with self.scope(names[2]):
                    y = self.op("MatMul", [hmid, w2])              # [E, C, h]
            else:                    # GELU experts
                w1 = self.param(names[0] + ".weight", [E, h, f])
                w2 = self.param(names[1] + ".weight", [E, f, h])
                with self.scope(names[0]):
                    g = self.op("MatMul", [xe, w1])
                g = self.gelu(g)
                with self.scope(names[1]):
                    y = self.op("MatMul", [g, w2])
        y = self.op("Mul", [y, self.op("Unsqueeze", [cw, self.i64([2])])])
        out0 = self.op("ConstantOfShape", [self.op("Shape", [xf])],
                       value=self.fill_value(0.0))
        idx = self.op("Unsqueeze", [ci, self.i64([2])])            # [E, C, 1]
        out = self.op("ScatterND", [out0, idx, y], reduction="add")
        return self.op("Reshape", [out, self.op("Shape", [x])])

    def expert_mlp(self, t, c, names, stacked):
        """One expert's MLP on t ([n, h]) with its own weights [h, f] /
        [f, h], or every expert's at once on t ([E, C, h]) with stacked
        weights [E, h, f] / [E, f, h]."""
        h, E, f = c.hidden, c.experts, c.expert_ffn
        lead = [E] if stacked else []
        if len(names) == 3:      # SwiGLU
            w1 = self.param(names[0] + ".weight", lead + [h, f])
            w3 = self.param(names[1] + ".weight", lead + [h, f])
            w2 = self.param(names[2] + ".weight", lead + [f, h])
            with self.scope(names[0]):
                g = self.silu(self.op("MatMul", [t, w1]))
            with self.scope(names[1]):
                u = self.op("MatMul", [t, w3])
            with self.scope(names[2]):
                return self.op("MatMul", [self.op("Mul", [g, u]), w2])
        w1 = self.param(names[0] + ".weight", lead + [h, f])
        w2 = self.param(names[1] + ".weight", lead + [f, h])
        with self.scope(names[0]):
            g = self.gelu(self.op("MatMul", [t, w1]))
        with self.scope(names[1]):
            return self.op("MatMul", [g, w2])

    def moe_other(self, x, c, router_module, experts_module, names):
        """The same top-k MoE written as other exporters write it
        (MOE_STYLES): the router, its Softmax and TopK as in moe(), then
          einsum:   GShard/Switch/DeepSpeed-MoE capacity dispatch: OneHot
                    over E -> CumSum positions -> OneHot over the capacity
                    (shape arithmetic) -> Einsum 'tec,th->ech' -> stacked
                    experts -> Einsum 'tec,ech->th';
          unrolled: one branch per expert (an nn.ModuleList loop), every
                    token, scaled by its column of the scattered gates,
                    summed by an Add chain;
          dense:    the same loop gated by Equal(TopK index, e) (torch's
                    export of `(idx == e)`), as in a dense-gated Mixtral;
          indexed:  HF Mixtral's eager path: one_hot(idx).permute(2,1,0)[e]
                    -> NonZero -> Gather of the routed tokens -> expert ->
                    ScatterND(add) into the output (index_add_)."""
        h, E, k = c.hidden, c.experts, c.top_k
        style = c.moe_style
        xf = self.op("Reshape", [x, self.i64([-1, h])])            # [T, h]
        with self.scope(router_module):
            wg = self.param("weight", [h, E])
            logits = self.op("MatMul", [xf, wg])                   # [T, E]
        probs = self.op("Softmax", [logits], axis=-1)
        topv, topi = self.op("TopK", [probs, self.i64([k])], outputs=2,
                             axis=-1, largest=1, sorted=1)         # [T, k]
        if c.normalize_topk:
            denom = self.op("ReduceSum", [topv, self.i64([-1])], keepdims=1)
            topv = self.op("Div", [topv, denom])
        onoff = helper.make_tensor(
            "v", self.elem, [2], np.array([0, 1], dtype=self.npdt).tobytes(),
            raw=True)
        if style == "einsum":
            mask = self.op("OneHot", [topi, self.i64(E),
                                      self.op("Constant", [], value=onoff)],
                           axis=-1)                                # [T, k, E]
            mask = self.op("ReduceSum", [mask, self.i64([1])], keepdims=0)
            zeros = self.op("ConstantOfShape", [self.op("Shape", [probs])],
                            value=self.fill_value(0.0))
            gates = self.op("ScatterElements", [zeros, topi, topv], axis=1)
            # capacity C = min(T, ceil(T * k * capacity_factor / E)), in
            # float32 whatever the model's type (the exporter traces Python
            # arithmetic on the token count)
            def f32(v):
                return self.op("Constant", [], value=helper.make_tensor(
                    "value", TensorProto.FLOAT, [], [float(v)]))
            t = self.op("Cast", [self.dim(xf, 0, unsqueeze=False)],
                        to=TensorProto.FLOAT)
            cap32 = self.op("Ceil", [self.op("Div", [
                self.op("Mul", [t, f32(k * c.capacity_factor)]),
                f32(E)])])
            cap32 = self.op("Min", [cap32, t])
            cap = self.op("Cast", [cap32], to=TensorProto.INT64)
            capf = self.op("Cast", [cap32], to=self.elem)
            pos = self.op("Mul", [self.op("Sub", [
                self.op("CumSum", [mask, self.i64(0)]), self.fconst(1.0)]),
                mask])                                             # [T, E]
            keep = self.op("Mul", [mask, self.op("Cast", [
                self.op("Less", [pos, capf])], to=self.elem)])
            posc = self.op("OneHot", [
                self.op("Cast", [self.op("Mul", [pos, keep])],
                        to=TensorProto.INT64),
                cap, self.op("Constant", [], value=onoff)], axis=-1)
            disp = self.op("Mul", [self.op("Unsqueeze", [
                keep, self.i64([-1])]), posc])                     # [T, E, C]
            comb = self.op("Mul", [disp, self.op("Unsqueeze", [
                gates, self.i64([-1])])])
            xe = self.op("Einsum", [disp, xf], equation="tec,th->ech")
            with self.scope(experts_module):
                y = self.expert_mlp(xe, c, names, stacked=True)   # [E, C, h]
            out = self.op("Einsum", [comb, y], equation="tec,ech->th")
            return self.op("Reshape", [out, self.op("Shape", [x])])
        if style in ("unrolled", "dense"):
            if style == "unrolled":
                zeros = self.op("ConstantOfShape",
                                [self.op("Shape", [probs])],
                                value=self.fill_value(0.0))
                gates = self.op("ScatterElements", [zeros, topi, topv],
                                axis=1)                            # [T, E]
            acc = None
            for e in range(E):
                with self.scope(experts_module, str(e)):
                    y = self.expert_mlp(xf, c, names, stacked=False)
                if style == "unrolled":
                    ge = self.op("Slice", [gates, self.i64([e]),
                                           self.i64([e + 1]), self.i64([1])])
                else:
                    sel = self.op("Cast", [self.op("Equal", [
                        topi, self.i64(e)])], to=self.elem)        # [T, k]
                    ge = self.op("ReduceSum", [
                        self.op("Mul", [topv, sel]), self.i64([1])],
                        keepdims=1)                                # [T, 1]
                y = self.op("Mul", [y, ge])
                acc = y if acc is None else self.op("Add", [acc, y])
            return self.op("Reshape", [acc, self.op("Shape", [x])])
        assert style == "indexed", style
        onoff64 = helper.make_tensor("v", TensorProto.INT64, [2], [0, 1])
        mask = self.op("OneHot", [topi, self.i64(E),
                                  self.op("Constant", [], value=onoff64)],
                       axis=-1)                                    # [T, k, E]
        mask = self.op("Transpose", [mask], perm=[2, 1, 0])        # [E, k, T]
        flatw = self.op("Reshape", [topv, self.i64([-1])])         # [T*k]
        out = self.op("ConstantOfShape", [self.op("Shape", [xf])],
                      value=self.fill_value(0.0))
        for e in range(E):
            nz = self.op("NonZero", [self.op("Gather", [mask, self.i64(e)],
                                             axis=0)])             # [2, n]
            slot = self.op("Gather", [nz, self.i64(0)], axis=0)    # [n]
            tok = self.op("Gather", [nz, self.i64(1)], axis=0)     # [n]
            cur = self.op("Gather", [xf, tok], axis=0)             # [n, h]
            with self.scope(experts_module, str(e)):
                y = self.expert_mlp(cur, c, names, stacked=False)
            wi = self.op("Add", [self.op("Mul", [tok, self.i64(k)]), slot])
            w = self.op("Unsqueeze", [self.op("Gather", [flatw, wi], axis=0),
                                      self.i64([1])])              # [n, 1]
            y = self.op("Mul", [y, w])
            out = self.op("ScatterND", [
                out, self.op("Unsqueeze", [tok, self.i64([1])]), y],
                reduction="add")
        return self.op("Reshape", [out, self.op("Shape", [x])])

    # -- output -------------------------------------------------------------
    def finish(self, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, self.cfg.name.replace("-", "_"),
                                  inputs, outputs, self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION, producer_name=PRODUCER,
            producer_version="1", doc_string=doc)
        return model


def vinfo(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


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


def bind_args(c):
    """The plan-parallel binds for a planning run of this model."""
    a = f"--batch {c.batch}"
    if c.seq:
        a += f" --seq {c.seq}"
    return a


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def build(cfg, dtype="float32", with_weights=False):
    b = Builder(cfg, dtype, with_weights)
    inputs, outputs = BUILDERS[cfg.family](b, cfg)
    want = expected_params(cfg)
    if b.param_count != want:
        raise AssertionError(f"{cfg.name}: graph has {b.param_count} "
                             f"parameters, configuration says {want}")
    weights = ("Random weights (seed 0)." if with_weights else
               "Shape-only: the external weights file is not written.")
    doc = (f"loom-zoo {cfg.name}: {describe(cfg)}. {weights} "
           f"Source: {cfg.source or 'tiny test version'}")
    model = b.finish(inputs, outputs, doc)
    meta = {"name": cfg.name, "family": cfg.family,
            "parameters": str(want), "bind": bind_args(cfg),
            "config": json.dumps(dataclasses.asdict(cfg), sort_keys=True)}
    for k, v in meta.items():
        p = model.metadata_props.add()
        p.key = "loom_zoo." + k
        p.value = v
    return model, b


def check(model, location):
    # ONNX 1.12's checker stat()s each external-data file relative to the
    # current directory; give it an empty stand-in in a scratch directory
    # (it does not read the data without full_check).
    cwd = os.getcwd()
    tmp = tempfile.mkdtemp(prefix="loom-zoo-check-")
    try:
        open(os.path.join(tmp, location), "wb").close()
        os.chdir(tmp)
        onnx.checker.check_model(model)
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp)
    onnx.shape_inference.infer_shapes(model, check_type=True,
                                      strict_mode=True)


def write(cfg, out_dir, dtype, with_weights, do_check):
    t0 = time.perf_counter()
    model, b = build(cfg, dtype, with_weights)
    t1 = time.perf_counter()
    if do_check:
        check(model, b.location)
    t2 = time.perf_counter()
    path = os.path.join(out_dir, cfg.name + ".onnx")
    wpath = os.path.join(out_dir, b.location)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    if with_weights:
        with open(wpath, "wb") as f:
            for off, raw in b.blobs:
                f.seek(off)
                f.write(raw)
            f.truncate(b.offset)
    elif os.path.exists(wpath):
        os.remove(wpath)     # a stale weights file would defeat shape-only
    t3 = time.perf_counter()
    return {"name": cfg.name, "nodes": len(model.graph.node),
            "initializers": len(model.graph.initializer),
            "params": b.param_count, "bytes": os.path.getsize(path),
            "build_s": t1 - t0, "check_s": t2 - t1, "write_s": t3 - t2}


def fmt_count(n):
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3f}{unit}"
    return str(n)


def print_list(cfgs):
    print(f"{'name':<18} {'expected':>16} {'':>9} {'published':>10} "
          f"{'diff':>7}  config / source")
    for c in cfgs:
        n = expected_params(c)
        if c.published and c.full_scale:
            diff = f"{100.0 * (n - c.published) / c.published:+.2f}%"
            pub = fmt_count(c.published)
        else:
            diff, pub = "", "-"
        print(f"{c.name:<18} {n:>16} {fmt_count(n):>9} {pub:>10} {diff:>7}  "
              f"{describe(c)}; bind {bind_args(c)}")
        if c.source:
            print(f"{'':<18}   source: {c.source}")
        if c.published_note and c.full_scale:
            print(f"{'':<18}   published: {c.published_note}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--layers", type=int, help="override the layer count")
    ap.add_argument("--vocab", type=int,
                    help="override the vocabulary (GPT-2's unpadded 50257 "
                         "for the padding tests)")
    ap.add_argument("--max-pos", type=int,
                    help="override the position tables' length (longer "
                         "contexts, as long-context continued training "
                         "extends them)")
    ap.add_argument("--with-weights", action="store_true",
                    help="write random weights (small models only)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("--no-check", action="store_true",
                    help="skip onnx.checker and shape inference")
    ap.add_argument("--list", action="store_true",
                    help="print the models and their parameter counts")
    ap.add_argument("--time-limit", type=float, metavar="SECONDS",
                    help="fail if writing the models takes longer")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--moe-style", choices=MOE_STYLES,
                    help="write the MoE layers as another exporter does "
                         "(models NAME-STYLE; MoE models only)")
    args = ap.parse_args(argv)

    if args.only:
        names = [n for n in args.only.split(",") if n]
        unknown = [n for n in names if n not in ALL]
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; "
                     f"known: {', '.join(ALL)}")
        cfgs = [ALL[n] for n in names]
    else:
        cfgs = MODELS + TINY
    cfgs = [with_layers(c, args.layers) for c in cfgs]
    if args.vocab is not None:
        if args.vocab < 2:
            ap.error("--vocab must be >= 2")
        cfgs = [dataclasses.replace(c, vocab=args.vocab, full_scale=False)
                if c.vocab else c for c in cfgs]
    if args.max_pos is not None:
        if args.max_pos < 1:
            ap.error("--max-pos must be >= 1")
        cfgs = [dataclasses.replace(c, max_pos=args.max_pos)
                if c.max_pos else c for c in cfgs]
    if args.moe_style and args.moe_style != "capacity":
        dense = [c.name for c in cfgs if not c.experts]
        if args.only and dense:
            ap.error(f"--moe-style: {', '.join(dense)} has no experts")
        cfgs = [with_moe_style(c, args.moe_style) for c in cfgs if c.experts]

    if args.list:
        print_list(cfgs)
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required (or --list)")
    if args.with_weights:
        big = [f"{c.name} ({expected_params(c):,})" for c in cfgs
               if expected_params(c) > WITH_WEIGHTS_LIMIT]
        if big:
            ap.error(f"--with-weights is for models up to "
                     f"{WITH_WEIGHTS_LIMIT:,} parameters: {', '.join(big)}")
    os.makedirs(args.out_dir, exist_ok=True)
    t0 = time.perf_counter()
    for c in cfgs:
        r = write(c, args.out_dir, args.dtype, args.with_weights,
                  not args.no_check)
        if not args.quiet:
            print(f"{r['name']:<18} {r['nodes']:>6} nodes "
                  f"{r['initializers']:>5} initializers "
                  f"{r['params']:>16} params {r['bytes'] / 1e6:7.2f} MB  "
                  f"build {r['build_s']:.2f}s check {r['check_s']:.2f}s "
                  f"write {r['write_s']:.2f}s", flush=True)
    elapsed = time.perf_counter() - t0
    if not args.quiet:
        print(f"wrote {len(cfgs)} models to {args.out_dir} in {elapsed:.1f}s")
    if args.time_limit is not None and elapsed > args.time_limit:
        print(f"make_zoo: error: writing took {elapsed:.1f}s, more than the "
              f"limit of {args.time_limit:g}s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
