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

The graph builder and its common blocks (Builder) are in zoo_builder.py,
the architectures (build_gpt, build_llama, ...) in zoo_archs.py; this
file holds the configurations, the parameter counts and the driver.

Only onnx + numpy + the standard library (no torch).
"""

import sys

sys.dont_write_bytecode = True  # keep examples/models free of __pycache__

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# The names moved to the sibling modules stay importable from make_zoo.
from zoo_builder import (  # noqa: E402,F401
    ALIGN, DTYPES, FLOAT_MIN, IR_VERSION, OPSET, PRODUCER, Builder, vinfo)
from zoo_archs import (  # noqa: E402,F401
    BUILDERS, build_bert, build_dlrm, build_gpt, build_llama, build_vit,
    encoder_attention, rotary_tables)

WITH_WEIGHTS_LIMIT = 50_000_000


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
    # Llama 3 8B (Llama Team 2024, "The Llama 3 Herd of Models", Table 3;
    # HF meta-llama/Meta-Llama-3-8B config.json): 32 layers, 4096, 32
    # heads, 8 KV heads, FFN 14336, vocab 128256, rope theta 5e5, context
    # 8192. NeMo's long-sequence table on DGX-B200 trains it
    # (test/validation/runs.csv, nemo-cp-b200-*).
    Config(name="llama3-8b", family="llama",
           source="Llama Team 2024, 'The Llama 3 Herd of Models', Table 3; "
                  "HF meta-llama/Meta-Llama-3-8B config.json (GQA, 8 KV heads)",
           layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
           vocab=128256, max_pos=8192, rope_theta=5e5,
           published=8_030_261_248,
           published_note="exact count of the released checkpoint ('8B')"),
    # Llama 3 70B (Llama Team 2024, "The Llama 3 Herd of Models", Table 3;
    # HF meta-llama/Meta-Llama-3-70B config.json): 80 layers, 8192, 64
    # heads, 8 KV heads, FFN 28672, vocab 128256 (untied), rope theta 5e5,
    # context 8192. vLLM's nightly latency test serves it at tp 4
    # (test/validation/serving.csv, vllm-*-70b-*).
    Config(name="llama3-70b", family="llama",
           source="Llama Team 2024, 'The Llama 3 Herd of Models', Table 3; "
                  "HF meta-llama/Meta-Llama-3-70B config.json (GQA, 8 KV heads)",
           layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672,
           vocab=128256, max_pos=8192, rope_theta=5e5,
           published=70_553_706_496,
           published_note="exact count of the released checkpoint ('70B')"),
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
    # ChatGLM3-6B (HF THUDM/chatglm3-6b config.json; MindSpeed-LLM's
    # examples/mcore/chatglm3 scripts): 28 layers, h 4096, 32 heads, 2 K/V
    # groups, SwiGLU FFN 13696, RMSNorm, vocab 65024, untied head. Written
    # in the llama family: its q/k/v biases (28 x 4608 parameters) and
    # half-width rotary (--rotary-percent 0.5) are left out; rotary tables
    # of 32768 positions (its 32K row). runs.csv ms-chatglm3-6b-32k.
    Config(name="chatglm3-6b", family="llama",
           source="HF THUDM/chatglm3-6b config.json; MindSpeed-LLM "
                  "examples/mcore/chatglm3/pretrain_chatglm3_6B_32K.sh",
           layers=28, hidden=4096, heads=32, kv_heads=2, ffn=13696,
           vocab=65024, max_pos=32768, published=6_243_584_000,
           published_note="parameters of the released checkpoint (6.24B; "
                          "q/k/v biases included, not written here)"),
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
