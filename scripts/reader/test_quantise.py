"""Tests of quantise.unsigned_weights: 8-bit weights made unsigned give the exact integer product on every CPU.

Run by `make test` with the ONNX venv's Python (onnx, onnxruntime, numpy; no PyTorch): one MatMulInteger node as
ONNX Runtime's dynamic quantisation writes it, with weights at the ends of the int8 range, where ONNX Runtime's
u8 x s8 kernel on AVX2 CPUs without VNNI saturates its 16-bit pair sums (quantise.py's docstring).
"""

import os
import unittest

import numpy as np

from quantise import unsigned_weights


def matmul_integer(weights, zero_points):
    """A model computing A (u8, fed) x `weights` with per-column `zero_points`, as int32."""
    from onnx import TensorProto, helper, numpy_helper

    k, n = weights.shape
    node = helper.make_node("MatMulInteger", ["a", "w", "a_zero", "w_zero"], ["y"], name="layer.0/dense/MatMul")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, n])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(np.array(0, np.uint8), "a_zero"),
         numpy_helper.from_array(zero_points, "w_zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model, a):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"a": a})[0]


class UnsignedWeights(unittest.TestCase):
    def test_the_rewritten_graph_computes_the_exact_product(self):
        from onnx import TensorProto

        rng = np.random.default_rng(7)
        k, n = 64, 16
        weights = rng.integers(-128, 128, size=(k, n)).astype(np.int8)
        weights[:, 0] = 127  # with activations at 255 every pair sums to 64,770: past 16 bits
        weights[:, 1] = -128
        zero_points = np.zeros(n, np.int8)
        a = rng.integers(0, 256, size=(5, k)).astype(np.uint8)
        a[0] = 255
        want = (a.astype(np.int64) @ weights.astype(np.int64)).astype(np.int32)

        model = matmul_integer(weights, zero_points)
        self.assertEqual(unsigned_weights(model), 1)
        inits = {i.name: i for i in model.graph.initializer}
        self.assertEqual(inits["w"].data_type, TensorProto.UINT8)
        self.assertEqual(inits["w_zero"].data_type, TensorProto.UINT8)
        np.testing.assert_array_equal(run(model, a), want)

    def test_only_int8_weights_with_a_zero_point_are_rewritten(self):
        weights = np.arange(8, dtype=np.uint8).reshape(2, 4)
        model = matmul_integer(weights, np.full(4, 3, np.uint8))
        self.assertEqual(unsigned_weights(model), 0)
        a = np.array([[1, 2]], np.uint8)
        np.testing.assert_array_equal(run(model, a), (a.astype(np.int32) @ (weights.astype(np.int32) - 3)))

    def test_no_committed_graph_can_saturate(self):
        # Signed 8-bit weights beyond the 7-bit range would give these graphs other outputs on other CPUs.
        from onnx import TensorProto, load, numpy_helper

        models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "attest-models",
                              "models")
        for graph_file in ("bge-qa/model.onnx", "reader-bge/reader.onnx"):
            graph = load(os.path.join(models, graph_file)).graph
            inits = {i.name: i for i in graph.initializer}
            weights = [inits[n.input[1]] for n in graph.node if n.op_type == "MatMulInteger"]
            self.assertTrue(weights, graph_file)
            for w in weights:
                if w.data_type == TensorProto.INT8:
                    self.assertLessEqual(int(np.abs(numpy_helper.to_array(w).astype(np.int16)).max()), 64,
                                         f"{graph_file}: {w.name}")


if __name__ == "__main__":
    unittest.main()
