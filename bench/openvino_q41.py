"""Why OpenVINO GenAI's reading of a Q4_1 GGUF gives numbers different from llama.cpp's, and a repair of its IR.

A Q4_1 block holds 32 weights as ``w = d * q + m`` (``q`` in 0..15, ``d`` and ``m`` f16). OpenVINO GenAI's GGUF
reader (``gguf_utils/gguf_quants.cpp`` keeps ``q``, ``d`` and ``m`` exactly) builds each weight's decompression
subgraph in ``building_blocks.cpp`` ``make_int4_weights`` as ``(q - zp) * d`` with an *integer* u4 zero point
``zp = round(-m / d)``: the block's minimum ``m`` is replaced by ``-zp * d``, an error of up to half a quantisation
step added to all 32 weights of the block (and ``-m / d`` outside 0..15 wraps). The u4 weights and f16 scales are
Q4_1's own; only the zero points are requantised. The Q8_0 token embedding (tied to the output head) is exact:
its zero point 128 is an integer.

``exact_zero_points`` puts ``-m / d`` back as a fractional zero point (f16 constants in place of the u4 ones,
matched to the GGUF's blocks by each row's quants and scales), so the IR computes ``d * q + m`` up to that rounding.

Usage (from the repository root): ``python -m bench.openvino_q41 [--check-ir]`` prints the zero points' error over
the shipped GGUF (with ``--check-ir``, also whether GenAI's IR holds exactly ``std::round(-m/d)``);
``bench.openvino_logprobs --zero-points f16`` compares the repaired IR's numbers with xllamacpp's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 32
Q4_1_BYTES = 20


def q4_1_blocks(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q [rows, blocks, 32] u8 in weight order, d [rows, blocks] f16, m [rows, blocks] f16) of a Q4_1 tensor's raw
    bytes [rows, blocks * 20]."""
    rows = raw.shape[0]
    b = raw.reshape(rows, -1, Q4_1_BYTES)
    d = b[..., 0:2].copy().view(np.float16)[..., 0]
    m = b[..., 2:4].copy().view(np.float16)[..., 0]
    qs = b[..., 4:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # low nibbles are weights 0-15, high nibbles 16-31
    return q, d, m


def gguf_q4_1(gguf: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every Q4_1 tensor of the GGUF by name: (q, d, m) as :func:`q4_1_blocks` gives them."""
    import gguf as gg

    reader = gg.GGUFReader(str(gguf))
    out = {}
    for t in reader.tensors:
        if t.tensor_type == gg.GGMLQuantizationType.Q4_1:
            out[t.name] = q4_1_blocks(np.asarray(t.data))
    return out


def integer_zero_point_error(gguf: Path) -> dict[str, float]:
    """What GenAI's integer zero points do to the GGUF's Q4_1 blocks: the error ``|m - (-round(-m/d) * d)|`` in
    quantisation steps (``d``), and the blocks whose ``-m/d`` falls outside u4's 0..15."""
    steps: list[np.ndarray] = []
    outside = blocks = 0
    for q, d, m in gguf_q4_1(gguf).values():
        del q
        df, mf = d.astype(np.float64), m.astype(np.float64)
        ok = df != 0
        zp = -mf[ok] / df[ok]
        steps.append(np.abs(zp - np.round(zp)))
        outside += int(((np.round(zp) < 0) | (np.round(zp) > 15)).sum())
        blocks += int(d.size)
    e = np.concatenate(steps)
    return {
        "blocks": float(blocks),
        "mean_error_steps": float(e.mean()),
        "max_error_steps": float(e.max()),
        "share_over_quarter_step": float((e > 0.25).mean()),
        "outside_u4": float(outside),
    }


def _unpack_u4(node: Any) -> np.ndarray:
    """A u4 constant's values (low nibble first), in its shape."""
    packed = np.frombuffer(node.get_data().tobytes(), dtype=np.uint8)
    values = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(-1)
    return values.reshape(tuple(node.get_output_shape(0)))


def _decompressions(model: Any) -> list[tuple[Any, Any, Any, Any]]:
    """(subtract, u4 weight constant, u4 zero-point constant, f16 scale constant) of every int4 weight subgraph."""
    import openvino as ov

    found = []
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Subtract":
            continue
        convs = [node.input_value(i).get_node() for i in range(2)]
        if any(c.get_type_name() != "Convert" for c in convs):
            continue
        consts = [c.input_value(0).get_node() for c in convs]
        if any(c.get_type_name() != "Constant" or c.get_element_type() != ov.Type.u4 for c in consts):
            continue
        users = [t.get_node() for t in node.output(0).get_target_inputs()]
        if len(users) != 1 or users[0].get_type_name() != "Multiply":
            continue
        scale = users[0].input_value(1).get_node()
        found.append((node, consts[0], consts[1], scale))
    return found


def exact_zero_points(model: Any, gguf: Path) -> int:
    """Replace every int4 weight subgraph's integer zero points by the GGUF's ``-m / d`` (f16 constants, the
    subgraph's own precision), in place; the number of subgraphs changed. Each IR row is matched to the GGUF row
    with the same quants and scales (GenAI reorders q and k rows for its rotary embedding), so nothing is assumed
    about order."""
    import openvino.opset13 as ops

    table: dict[bytes, np.ndarray] = {}
    for q, d, m in gguf_q4_1(gguf).values():
        zp = np.where(d != 0, -m.astype(np.float64) / np.where(d != 0, d, 1).astype(np.float64), 0.0)
        for r in range(q.shape[0]):
            table[q[r].tobytes() + d[r].tobytes()] = zp[r]
    changed = 0
    for subtract, weights, _zero_points, scale in _decompressions(model):
        q = _unpack_u4(weights)
        d = np.asarray(scale.get_data(), dtype=np.float16).reshape(q.shape[0], q.shape[1])
        exact = np.empty((q.shape[0], q.shape[1], 1), dtype=np.float16)
        for r in range(q.shape[0]):
            key = q[r].astype(np.uint8).tobytes() + d[r].tobytes()
            if key not in table:
                raise SystemExit(f"{subtract.get_friendly_name()}: row {r} matches no Q4_1 row of {gguf.name}")
            exact[r, :, 0] = table[key]
        subtract.input(1).replace_source_output(ops.constant(exact).output(0))
        changed += 1
    model.validate_nodes_and_infer_types()
    return changed


def converted_zero_points(model: Any, gguf: Path) -> dict[str, float]:
    """Check GenAI's IR against the GGUF: of every int4 subgraph's u4 zero points, how many equal C++'s
    ``std::round(-m / d)`` (in f32, halves away from zero) of the GGUF block with the same quants and scales, and
    the largest distance of a zero point from the exact ``-m / d``."""
    table: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    for q, d, m in gguf_q4_1(gguf).values():
        for r in range(q.shape[0]):
            table[q[r].tobytes() + d[r].tobytes()] = (d[r], m[r])
    blocks = rounded = 0
    furthest = 0.0
    for _subtract, weights, zero_points, scale in _decompressions(model):
        q = _unpack_u4(weights)
        zp = _unpack_u4(zero_points).reshape(q.shape[0], q.shape[1]).astype(np.int64)
        d = np.asarray(scale.get_data(), dtype=np.float16).reshape(q.shape[0], q.shape[1])
        for r in range(q.shape[0]):
            dr, mr = table[q[r].astype(np.uint8).tobytes() + d[r].tobytes()]
            exact = -mr.astype(np.float32) / dr.astype(np.float32)
            cpp = (np.sign(exact) * np.floor(np.abs(exact) + np.float32(0.5))).astype(np.int64) & 0x0F
            rounded += int((cpp == zp[r]).sum())
            blocks += int(zp[r].size)
            furthest = max(furthest, float(np.abs(zp[r] - exact).max()))
    return {"blocks": float(blocks), "equal_to_round": float(rounded), "max_distance_steps": furthest}


def _weight_matmuls(model: Any) -> list[Any]:
    """The MatMuls whose second input is a decompressed weight (a Convert of a compressed constant's subgraph)."""
    out = []
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        source = node.input_value(1).get_node()
        if source.get_type_name() == "Convert" and source.input_value(0).get_node().get_type_name() == "Reshape":
            out.append(node)
    return out


def llama_cpp_activations(model: Any) -> int:
    """Round every weight product's activations as llama.cpp's CPU backend does before a Q4_1 or Q8_0 dot product
    (``quantize_row_q8_1`` / ``q8_0``): per block of 32, ``d = max|x| / 127``, ``q = round(x / d)`` (half to even,
    its AVX2 path), the product then reading ``q * fp16(d)``. In place; the number of MatMuls changed. For
    comparisons only (it costs time): run with DYNAMIC_QUANTIZATION_GROUP_SIZE 0, or the plugin rounds again."""
    import openvino as ov
    import openvino.opset13 as ops

    changed = 0
    for matmul in _weight_matmuls(model):
        x = matmul.input_value(0)
        blocks = ops.reshape(x, ops.constant(np.array([0, 0, -1, BLOCK], dtype=np.int64)), special_zero=True)
        amax = ops.reduce_max(ops.abs(blocks), ops.constant(np.array([-1], dtype=np.int64)), keep_dims=True)
        d = ops.divide(amax, ops.constant(np.float32(127.0)))
        inverse = ops.divide(ops.constant(np.float32(1.0)), ops.maximum(d, ops.constant(np.float32(1e-30))))
        q = ops.round(ops.multiply(blocks, inverse), "half_to_even")
        d16 = ops.convert(ops.convert(d, ov.Type.f16), ov.Type.f32)
        rounded = ops.reshape(ops.multiply(q, d16), ops.shape_of(x), special_zero=False)
        matmul.input(0).replace_source_output(rounded.output(0))
        changed += 1
    model.validate_nodes_and_infer_types()
    return changed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", default="", help="a Q4_1 GGUF (default: the embedded model's)")
    p.add_argument(
        "--check-ir",
        action="store_true",
        help="also convert the GGUF with OpenVINO GenAI and check its IR's zero points against round(-m/d)",
    )
    args = p.parse_args()
    if args.gguf:
        gguf = Path(args.gguf)
    else:
        from madrag.providers.models import smollm2_gguf_path

        gguf = smollm2_gguf_path()
    stats = integer_zero_point_error(gguf)
    print(f"{gguf.name}: {int(stats['blocks'])} Q4_1 blocks")
    print(
        f"  integer zero point round(-m/d) against the exact -m/d: mean error {stats['mean_error_steps']:.3f} "
        f"quantisation steps, max {stats['max_error_steps']:.3f}; "
        f"{100 * stats['share_over_quarter_step']:.1f}% of blocks off by more than a quarter step; "
        f"{int(stats['outside_u4'])} blocks outside u4's 0..15"
    )
    if args.check_ir:
        import openvino as ov
        from bench import openvino_runtime as ovr

        with ovr.Workdir() as tmp:
            check = converted_zero_points(ov.Core().read_model(str(ovr.convert_ir(gguf, tmp))), gguf)
        print(
            f"  GenAI's IR: {int(check['equal_to_round'])} of {int(check['blocks'])} u4 zero points equal "
            f"std::round(-m/d) of the GGUF's block; the furthest is {check['max_distance_steps']:.3f} steps from -m/d"
        )


if __name__ == "__main__":
    main()
