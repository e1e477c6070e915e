"""Graph-building helpers shared by this folder's onnx.helper generators
(make_attention_graph.py, make_causal_graph.py, make_elementwise_graph.py):
named nodes, scalar and small constant initializers, and the checked
opset-17 model they all save. Imported from the generator's own folder,
which Python puts first on sys.path for a script run by path.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16, F32, BOOL = TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.BOOL


def node(op, ins, outs, name, **attrs):
    """A node named NAME (the tests match nodes by name)."""
    return helper.make_node(op, ins, outs, name=name, **attrs)


def const(name, value, dtype):
    """An initializer NAME holding VALUE as a numpy array of DTYPE."""
    return numpy_helper.from_array(np.array(value, dtype), name)


def save_model(path, graph_name, nodes, inputs, outputs, inits):
    """Builds the graph (INPUTS and OUTPUTS are (name, element type, shape)
    triples), checks it as an opset-17, IR-8 model, and writes it to PATH."""
    graph = helper.make_graph(
        nodes, graph_name,
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
