"""Small transformer modules written in plain torch, used to produce
exporter-style ONNX graphs for Loom's tests and benchmarks.

No `transformers` dependency: the modules mimic the structure of Hugging Face
GPT-2 and LLaMA closely enough that torch.onnx.export emits the same kinds of
runtime shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
Range, Expand, Where, ConstantOfShape, Trilu, Slice ...).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# GPT-2 style decoder
# --------------------------------------------------------------------------


class GPT2Attention(nn.Module):
    def __init__(self, hidden, n_head):
        super().__init__()
        assert hidden % n_head == 0
        self.n_head = n_head
        self.head_dim = hidden // n_head
        self.c_attn = nn.Linear(hidden, 3 * hidden)  # fused q, k, v
        self.c_proj = nn.Linear(hidden, hidden)

    def _split_heads(self, x):
        b, t, _ = x.size()
        x = x.view(b, t, self.n_head, self.head_dim)
        return x.transpose(1, 2)  # [b, h, t, hd]

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = self._split_heads(q)
        k = self._split_heads(k)
        v = self._split_heads(v)

        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)

        # Causal mask built at runtime from the sequence length
        # (arange-based, like recent HF GPT-2): Range, Unsqueeze, Greater,
        # Expand, Where.
        idx = torch.arange(t, device=x.device)
        causal = idx.unsqueeze(0) > idx.unsqueeze(1)  # [t, t], True above diag
        causal = causal.view(1, 1, t, t).expand(b, 1, t, t)
        mask_value = torch.finfo(att.dtype).min
        att = att.masked_fill(causal, mask_value)

        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # [b, h, t, hd]
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, hidden, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = GPT2Attention(hidden, n_head)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = GPT2MLP(hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2LMHead(nn.Module):
    def __init__(self, vocab=256, hidden=64, n_layer=2, n_head=4,
                 max_pos=1024, tie_weights=True):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.h = nn.ModuleList([GPT2Block(hidden, n_head)
                                for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        if tie_weights:
            self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        b, t = input_ids.size()
        pos = torch.arange(0, t, dtype=torch.long, device=input_ids.device)
        pos = pos.unsqueeze(0).expand(b, t)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return self.lm_head(x)


# --------------------------------------------------------------------------
# LLaMA style decoder
# --------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float()
                                   / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids):
        # position_ids: [b, t] (int64) -> cos, sin: [b, t, head_dim]
        inv = self.inv_freq[None, :, None].float().expand(
            position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = torch.matmul(inv, pos).transpose(1, 2)  # [b, t, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    cos = cos.unsqueeze(1)  # [b, 1, t, hd]
    sin = sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(x, n_rep):
    # [b, n_kv, t, hd] -> [b, n_kv * n_rep, t, hd]  (HF LLaMA's repeat_kv)
    b, n_kv, t, hd = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(b, n_kv, n_rep, t, hd)
    return x.reshape(b, n_kv * n_rep, t, hd)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, n_head, n_kv_head):
        super().__init__()
        self.n_head = n_head
        self.n_kv_head = n_kv_head
        self.head_dim = hidden // n_head
        self.q_proj = nn.Linear(hidden, n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_head * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.size()
        q = self.q_proj(x).view(b, t, self.n_head, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv_head, self.head_dim)
        v = self.v_proj(x).view(b, t, self.n_kv_head, self.head_dim)
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)
        q, k = apply_rotary(q, k, cos, sin)
        n_rep = self.n_head // self.n_kv_head
        k = repeat_kv(k, n_rep)
        v = repeat_kv(v, n_rep)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        att = att + mask
        att = F.softmax(att, dim=-1, dtype=torch.float32)
        y = torch.matmul(att, v)
        y = y.transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, hidden, n_head, n_kv_head, inter):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = LlamaAttention(hidden, n_head, n_kv_head)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = LlamaMLP(hidden, inter)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab=256, hidden=64, n_layer=2, n_head=4, n_kv_head=2,
                 inter=172):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([
            LlamaBlock(hidden, n_head, n_kv_head, inter)
            for _ in range(n_layer)])
        self.norm = RMSNorm(hidden)
        self.rotary_emb = RotaryEmbedding(hidden // n_head)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids):
        b, t = input_ids.shape
        position_ids = torch.arange(t, dtype=torch.long,
                                    device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).expand(b, t)
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(position_ids)
        # Causal mask as HF LLaMA builds it: full(min) -> triu(1) -> expand.
        min_val = torch.finfo(x.dtype).min
        mask = torch.full((t, t), min_val, dtype=x.dtype, device=x.device)
        mask = torch.triu(mask, diagonal=1)
        mask = mask[None, None, :, :].expand(b, 1, t, t)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        x = self.norm(x)
        return self.lm_head(x)


# --------------------------------------------------------------------------
# Plain MLP
# --------------------------------------------------------------------------


class TinyMLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=256, d_out=64):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def randomize_norms(model, std=0.02):
    """Give every LayerNorm / RMSNorm its own non-trivial weights, as in a
    trained checkpoint. Freshly initialised norms are all ones / zeros, and
    torch.onnx.export then deduplicates them into one initializer plus
    Identity nodes, which real exported checkpoints do not have."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.LayerNorm, RMSNorm)):
                mod.weight.copy_(1.0 + std * torch.randn_like(mod.weight))
                if getattr(mod, "bias", None) is not None:
                    mod.bias.copy_(std * torch.randn_like(mod.bias))
    return model


# --------------------------------------------------------------------------
# LLaMA-style decoder with a Mixture-of-Experts MLP
# --------------------------------------------------------------------------


class MoEMLP(nn.Module):
    """Top-k mixture of SwiGLU experts, written the way simple reference
    implementations (and HF Mixtral's eager path, minus the index gather)
    write it: a Python loop over the experts, which torch.onnx.export
    unrolls into one branch per expert.

    Every expert runs densely on all tokens (static shapes); its output is
    scaled by the token's routing weight for that expert, which is zero
    unless the expert is among the token's top-k (mask via `Equal` on the
    top-k indices, `Where`, `ReduceSum`)."""

    def __init__(self, hidden, inter, n_experts=4, top_k=2):
        super().__init__()
        self.n_experts = n_experts
        self.top_k = top_k
        self.gate = nn.Linear(hidden, n_experts, bias=False)  # router
        self.experts = nn.ModuleList([LlamaMLP(hidden, inter)
                                      for _ in range(n_experts)])

    def forward(self, x):
        b, t, h = x.size()
        flat = x.reshape(-1, h)                        # [b*t, h]
        logits = self.gate(flat)                       # [b*t, E]
        probs = F.softmax(logits, dim=-1, dtype=torch.float32)
        topw, topi = torch.topk(probs, self.top_k, dim=-1)  # [b*t, k]
        topw = topw / topw.sum(dim=-1, keepdim=True)
        topw = topw.to(x.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            sel = topi == e                            # [b*t, k]
            w = torch.where(sel, topw, torch.zeros_like(topw)).sum(
                dim=-1, keepdim=True)                  # [b*t, 1]
            out = out + expert(flat) * w
        return out.view(b, t, h)


class DenseGatedMoEMLP(nn.Module):
    """The same mixture written as many training scripts write it: on the
    [b, t, h] activations (no flattening), the gate of expert e is
    `(topw * (topi == e)).sum(-1)` (Equal, Cast, Mul, ReduceSum), and the
    experts are summed straight into the residual stream (`x + moe(x)`
    follows the last `out + gate * expert(x)` Add, in the same block)."""

    def __init__(self, hidden, inter, n_experts=4, top_k=2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, n_experts, bias=False)
        self.experts = nn.ModuleList([LlamaMLP(hidden, inter)
                                      for _ in range(n_experts)])

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)
        topw, topi = torch.topk(probs, self.top_k, dim=-1)   # [b, t, k]
        topw = topw / topw.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            g = (topw * (topi == e).to(x.dtype)).sum(dim=-1, keepdim=True)
            out = out + g * expert(x)
        return out


class IndexRoutedMoEMLP(nn.Module):
    """HF Mixtral's sparse MoE block, eager path: per expert, the tokens
    routed to it are found with `torch.where` on the one-hot routing mask
    (ONNX NonZero: a data-dependent count), gathered, run through the
    expert, scaled by their routing weight and `index_add_`-ed back
    (ScatterElements with reduction 'add')."""

    def __init__(self, hidden, inter, n_experts=4, top_k=2):
        super().__init__()
        self.n_experts = n_experts
        self.top_k = top_k
        self.gate = nn.Linear(hidden, n_experts, bias=False)
        self.experts = nn.ModuleList([LlamaMLP(hidden, inter)
                                      for _ in range(n_experts)])

    def forward(self, x):
        b, t, h = x.size()
        flat = x.view(-1, h)
        probs = F.softmax(self.gate(flat), dim=1, dtype=torch.float)
        topw, topi = torch.topk(probs, self.top_k, dim=-1)
        topw = (topw / topw.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros((b * t, h), dtype=x.dtype)
        mask = F.one_hot(topi, num_classes=self.n_experts).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            idx, top_x = torch.where(mask[e])
            cur = flat[None, top_x].reshape(-1, h)
            cur = expert(cur) * topw[top_x, idx, None]
            out.index_add_(0, top_x, cur)
        return out.view(b, t, h)


MOE_ROUTING = {"loop": MoEMLP, "dense": DenseGatedMoEMLP,
               "index": IndexRoutedMoEMLP}


class MoEBlock(nn.Module):
    def __init__(self, hidden, n_head, n_kv_head, inter, n_experts, top_k,
                 routing="loop"):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = LlamaAttention(hidden, n_head, n_kv_head)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.block_sparse_moe = MOE_ROUTING[routing](hidden, inter, n_experts,
                                                     top_k)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        x = x + self.block_sparse_moe(self.post_attention_layernorm(x))
        return x


class MoEForCausalLM(LlamaForCausalLM):
    """LlamaForCausalLM whose blocks use MoEMLP (Mixtral-like naming)."""

    def __init__(self, vocab=256, hidden=64, n_layer=2, n_head=4, n_kv_head=2,
                 inter=128, n_experts=4, top_k=2, routing="loop"):
        super().__init__(vocab, hidden, n_layer, n_head, n_kv_head, inter)
        self.layers = nn.ModuleList([
            MoEBlock(hidden, n_head, n_kv_head, inter, n_experts, top_k,
                     routing)
            for _ in range(n_layer)])


# --------------------------------------------------------------------------
# Small ResNet-style CNN
# --------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU.
    A 1x1 conv + BN projection shortcut when stride or width changes."""

    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        sc = x if self.downsample is None else self.downsample(x)
        return F.relu(y + sc)


class TinyResNet(nn.Module):
    def __init__(self, widths=(16, 32), blocks=2, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        stages = []
        c_in = widths[0]
        for i, c in enumerate(widths):
            layers = []
            for j in range(blocks):
                stride = 2 if (i > 0 and j == 0) else 1
                layers.append(BasicBlock(c_in, c, stride))
                c_in = c
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2 = stages
        self.fc = nn.Linear(c_in, n_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def randomize_batchnorm(model, std=0.1):
    """Non-trivial BatchNorm affine parameters and running statistics, as in
    a trained checkpoint (fresh ones are all 1/0, and the exporter would
    deduplicate them)."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.copy_(1.0 + std * torch.randn_like(mod.weight))
                mod.bias.copy_(std * torch.randn_like(mod.bias))
                mod.running_mean.copy_(std * torch.randn_like(mod.running_mean))
                mod.running_var.copy_(1.0 + std * torch.rand_like(mod.running_var))
    return model


# --------------------------------------------------------------------------
# Vision transformers: ViT (timm's VisionTransformer layout) and Swin
# (Liu et al. 2021; timm's SwinTransformer layout), small
# --------------------------------------------------------------------------


class ViTAttention(nn.Module):
    def __init__(self, dim, n_head):
        super().__init__()
        self.n_head = n_head
        self.head_dim = dim // n_head
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.n_head, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        att = att.softmax(dim=-1)
        x = (att @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class ViTMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class ViTBlock(nn.Module):
    def __init__(self, dim, n_head, mlp):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ViTAttention(dim, n_head)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = ViTMLP(dim, mlp)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """Patch embedding (Conv), class token, learned positions, pre-norm
    blocks, final norm, head on the class token."""

    def __init__(self, image=32, patch=8, dim=32, depth=4, n_head=2, mlp=64,
                 n_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([ViTBlock(dim, n_head, mlp)
                                     for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [b, n, dim]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def window_partition(x, w):
    b, h, wd, c = x.shape
    x = x.view(b, h // w, w, wd // w, w, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, c)


def window_reverse(x, w, h, wd):
    c = x.shape[-1]
    x = x.view(-1, h // w, wd // w, w, w, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, h, wd, c)


class WindowAttention(nn.Module):
    def __init__(self, dim, window, n_head):
        super().__init__()
        self.n_head = n_head
        self.head_dim = dim // n_head
        self.window = window
        self.relative_position_bias_table = nn.Parameter(
            torch.randn((2 * window - 1) ** 2, n_head) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window),
                                            torch.arange(window),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
        rel = rel + (window - 1)
        index = rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]
        self.register_buffer("relative_position_index", index,
                             persistent=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.n_head, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(n, n, -1)
        att = att + bias.permute(2, 0, 1).unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            att = att.view(-1, nw, self.n_head, n, n) + mask.unsqueeze(
                1).unsqueeze(0)
            att = att.view(-1, self.n_head, n, n)
        att = att.softmax(dim=-1)
        x = (att @ v).transpose(1, 2).reshape(bw, n, c)
        return self.proj(x)


class SwinBlock(nn.Module):
    def __init__(self, dim, res, n_head, window, shift, mlp_ratio=2):
        super().__init__()
        self.res = res
        self.window = min(window, res)
        self.shift = 0 if res <= window else shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, self.window, n_head)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = ViTMLP(dim, dim * mlp_ratio)
        mask = None
        if self.shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -self.window), slice(-self.window, -self.shift),
                       slice(-self.shift, None)):
                for ws in (slice(0, -self.window),
                           slice(-self.window, -self.shift),
                           slice(-self.shift, None)):
                    img[:, hs, ws, :] = cnt
                    cnt += 1
            mw = window_partition(img, self.window).squeeze(-1)
            mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(
                mask == 0, 0.0)
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x):
        b, L, c = x.shape
        h = w = self.res
        shortcut = x
        x = self.norm1(x).view(b, h, w, c)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        xw = window_partition(x, self.window)
        xw = self.attn(xw, self.attn_mask)
        x = window_reverse(xw, self.window, h, w)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x.reshape(b, h * w, c)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim, res):
        super().__init__()
        self.res = res
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        b, L, c = x.shape
        x = x.view(b, self.res, self.res, c)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2],
                       x[:, 1::2, 1::2]], -1).view(b, -1, 4 * c)
        return self.reduction(self.norm(x))


class TinySwin(nn.Module):
    """Patch embedding, stages of (regular, shifted) window-attention block
    pairs with patch merging between them, final norm, mean pool, head."""

    def __init__(self, image=32, patch=2, dim=16, depths=(4, 2),
                 heads=(1, 2), window=4, n_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.patch_norm = nn.LayerNorm(dim)
        res = image // patch
        layers = []
        for i, (d, nh) in enumerate(zip(depths, heads)):
            for j in range(d):
                layers.append(SwinBlock(dim, res, nh, window,
                                        0 if j % 2 == 0 else window // 2))
            if i + 1 < len(depths):
                layers.append(PatchMerging(dim, res))
                dim *= 2
                res //= 2
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        x = self.patch_norm(self.patch_embed(x).flatten(2).transpose(1, 2))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(1))
