"""benchmarks/machine_limit.py's FLOP count (issue #69 §3): the shares it prints are only as right as this."""

import importlib.util
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("machine_limit", REPO / "benchmarks" / "machine_limit.py")
machine_limit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(machine_limit)


def test_forward_flops_of_minilm_sentences_by_hand():
    """MiniLM-L6 (d 384, ff 1536, 6 layers). A 10-token sentence, per layer: the linear maps 2 * 10 *
    (4 * 384^2 + 2 * 384 * 1536) = 35,389,440, attention 4 * 10^2 * 384 = 153,600; times 6 layers = 213,258,240.
    A 1-token sentence: 6 * (2 * 1,769,472 + 1,536) = 21,242,880. Padding is not counted: only the lengths."""
    assert machine_limit.forward_flops(np.array([10]), 6, 384, 1536) == 213_258_240
    assert machine_limit.forward_flops(np.array([1]), 6, 384, 1536) == 21_242_880
    assert machine_limit.forward_flops(np.array([10, 1]), 6, 384, 1536) == 213_258_240 + 21_242_880


def test_a_layer_has_six_linear_maps_and_training_counts_both_backward_products():
    """Q, K, V, O (d -> d), up (d -> ff), down (ff -> d); forward 2 * rows * (4 d^2 + 2 d ff) FLOPs, training 3x."""
    assert machine_limit.linear_shapes(384, 1536) == [(384, 384)] * 4 + [(384, 1536), (1536, 384)]
    fwd = machine_limit.layer_products(8, 4, 16, backward=False)
    both = machine_limit.layer_products(8, 4, 16, backward=True)
    assert sum(f for f, _ in fwd) == 2 * 8 * (4 * 16 + 2 * 4 * 16)
    assert sum(f for f, _ in both) == 3 * sum(f for f, _ in fwd)
    x_w = fwd[4][1]()        # up: rows x d -> rows x ff
    assert tuple(x_w.shape) == (8, 16)
