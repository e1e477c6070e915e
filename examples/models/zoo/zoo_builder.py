"""The graph builder of Loom's model zoo (make_zoo.py): Builder, which
writes ONNX nodes named and laid out as torch.onnx.export writes them and
shape-only (or seeded random) initializers with external data, with the
common blocks of every architecture (Linear / Gemm, LayerNorm, RMSNorm,
GELU, SiLU, attention pieces, causal mask, the MoE layer in each writing
of make_zoo.MOE_STYLES); vinfo; and the ONNX constants the models are
written with (opset, IR version, producer, element types).

make_zoo.py's docstring describes the graph layout. Only onnx + numpy +
the standard library.
"""

import contextlib
import math

import numpy as np
from onnx import TensorProto, helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "loom-zoo"
ALIGN = 64  # byte alignment of each tensor in the (virtual) weights file

DTYPES = {
    "float32": (TensorProto.FLOAT, 4, np.float32),
    "float16": (TensorProto.FLOAT16, 2, np.float16),
}
FLOAT_MIN = {"float32": float(np.finfo(np.float32).min),
             "float16": float(np.finfo(np.float16).min)}


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
