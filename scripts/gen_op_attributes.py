#!/usr/bin/python3
"""Writes src/onnx/op_attributes.cc: for each ONNX op in src/ir/ops.def, every version of its
schema (since_version -> attribute name -> type), the table the importer checks node attributes
against (docs/decisions/0026-unknown-attributes.md).

Source: Debian's python3-onnx (ONNX 1.12, opsets 1..17, `onnx.defs`), plus the attribute changes of
opsets 18..24 from the ONNX operator changelog (docs/Changelog.md), listed in NEWER below. (The ops the
importer lowers into several layers, Attention-23/24 etc., have their rows in onnx/op_schema.cc.) Run with
/usr/bin/python3 (Debian's onnx) from the repository root: /usr/bin/python3 scripts/gen_op_attributes.py
"""
import re
import onnx.defs

# Attribute changes after ONNX 1.12 (opset 17), from ONNX's Changelog.md: (op, since_version,
# attributes added, attributes removed). Versions that changed only types are not listed (the
# attributes of the previous version stay in force).
NEWER = [
    ("Resize", 18, {"antialias": "INT", "axes": "INTS", "keep_aspect_ratio_policy": "STRING"}, []),
    ("Split", 18, {"num_outputs": "INT"}, []),
    *[(r, 18, {"noop_with_empty_axes": "INT"}, ["axes"]) for r in
      ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
       "ReduceProd", "ReduceSumSquare"]],
    ("LpPool", 18, {"ceil_mode": "INT", "dilations": "INTS"}, []),  # LpPool-18: "dilations : list of ints"
    ("GroupNormalization", 18, {"epsilon": "FLOAT", "num_groups": "INT"}, []),
    ("ScatterElements", 18, {}, []),
    ("ScatterND", 18, {}, []),
    ("Pad", 18, {}, []),
    ("BitwiseAnd", 18, {}, []), ("BitwiseOr", 18, {}, []), ("BitwiseXor", 18, {}, []), ("BitwiseNot", 18, {}, []),
    ("Mish", 18, {}, []),
    ("OptionalGetElement", 18, {}, []), ("OptionalHasElement", 18, {}, []),
    ("AveragePool", 19, {"dilations": "INTS"}, []),
    ("Cast", 19, {"saturate": "INT"}, []),
    ("CastLike", 19, {"saturate": "INT"}, []),
    ("QuantizeLinear", 19, {"saturate": "INT"}, []),
    ("DequantizeLinear", 19, {}, []),
    ("DFT", 20, {}, ["axis"]),
    ("Gelu", 20, {"approximate": "STRING"}, []),
    ("GridSample", 20, {}, []),
    ("QuantizeLinear", 21, {"block_size": "INT", "output_dtype": "INT"}, []),
    ("DequantizeLinear", 21, {"block_size": "INT"}, []),
    ("GroupNormalization", 21, {"stash_type": "INT"}, []),
    # Opset 23 (Changelog.md "Version 23 of the default ONNX operator set"): QuantizeLinear-23 adds
    # "precision : int (default is 0) ... The precision of the division operation between x and
    # y_scale"; DequantizeLinear-23 adds "output_dtype : int (default is 0) ... The output data type".
    # Cast, CastLike, Constant, ConstantOfShape, Flatten, Identity, If, Loop, Pad, Reshape, Scan,
    # Shape, Size, Squeeze, Transpose, Unsqueeze -23 changed types only (float4e2m1, int4/uint4).
    ("QuantizeLinear", 23, {"precision": "INT"}, []),
    ("DequantizeLinear", 23, {"output_dtype": "INT"}, []),
    # Opset 24: Cast-24 / CastLike-24 add "round_mode : string (default is up) ... Rounding mode
    # for conversion to float8e8m0. It only applies to casting to float8e8m0". Constant,
    # ConstantOfShape, DequantizeLinear, Flatten, Identity, If, Loop, Pad, QuantizeLinear, Reshape,
    # Scan, Shape, Size, SplitToSequence, Squeeze, TopK, Transpose, Unsqueeze -24 changed types only
    # (float8e8m0); Swish-24 and TensorScatter-24 are new ops Kiln does not have.
    ("Cast", 24, {"round_mode": "STRING"}, []),
    ("CastLike", 24, {"round_mode": "STRING"}, []),
]
# Versions 18..24 that changed only types (Changelog.md; versions 18..22 were checked against onnx
# 1.23's own schemas on the GPU machine, bench/results/2026-11-25-h200-run30): a row with the
# previous version's attributes, so error messages name the version in force.
TYPE_ONLY = {
    19: "Constant Equal Identity If Loop Pad Reshape Resize Scan Shape Size",
    20: "ConstantOfShape IsInf IsNaN ReduceMax ReduceMin",
    21: "Cast CastLike Constant ConstantOfShape Flatten Identity If Loop Pad QLinearMatMul Reshape Scan Shape Size "
        "Squeeze Transpose Unsqueeze",
    22: "Acos Acosh Asin Asinh Atan Atanh AveragePool Conv ConvTranspose Cos Cosh Det Dropout Elu EyeLike GRU "
        "GlobalAveragePool GlobalLpPool GlobalMaxPool GridSample HardSigmoid HardSwish InstanceNormalization LSTM "
        "LpNormalization LpPool MaxPool MaxRoiPool MaxUnpool Mish NegativeLogLikelihoodLoss RNN RoiAlign Round Selu "
        "Sin Sinh Softplus Softsign Tan ThresholdedRelu",
    23: "Cast CastLike Constant ConstantOfShape Flatten Identity If Loop Pad Reshape Scan Shape Size Squeeze "
        "Transpose Unsqueeze",
    24: "Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad QuantizeLinear Reshape Scan Shape "
        "Size SplitToSequence Squeeze TopK Transpose Unsqueeze",
}
NEWEST_OPSET = 24
CPP = {"INT": "Int", "INTS": "Ints", "FLOAT": "Float", "FLOATS": "Floats", "STRING": "String", "STRINGS": "Strings",
       "TENSOR": "Tensor", "TENSORS": "Tensors", "GRAPH": "Graph", "GRAPHS": "Graphs", "SPARSE_TENSOR": "SparseTensor",
       "SPARSE_TENSORS": "SparseTensors", "TYPE_PROTO": "TypeProto", "TYPE_PROTOS": "TypeProtos"}  # opset 22 changed types only (bfloat16 for many ops)

def main():
    ops = re.findall(r"^KILN_OP\((\w+)\)", open("src/ir/ops.def").read(), re.M)
    table = {op: {} for op in ops}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain != "" or s.name not in table:
            continue
        table[s.name][s.since_version] = {k: str(v.type).split(".")[-1] for k, v in s.attributes.items()}
    changes = NEWER + [(op, ver, {}, []) for ver, names in TYPE_ONLY.items() for op in names.split()]
    for op, ver, add, remove in sorted(changes, key=lambda c: c[1]):
        if op not in table:
            continue
        versions = table[op]
        prev = dict(versions[max(v for v in versions if v < ver)]) if any(v < ver for v in versions) else {}
        for r in remove:
            prev.pop(r, None)
        prev.update(add)
        versions[ver] = prev
    missing = [op for op in ops if not table[op]]
    lines = [
        "// Generated by scripts/gen_op_attributes.py from ONNX's operator schemas (Debian python3-onnx",
        "// 1.12 for opsets 1..17, ONNX's Changelog.md for 18.." + str(NEWEST_OPSET) + "; 18..22 also checked against onnx",
        "// 1.23's own schemas, bench/results/2026-11-25-h200-run30). Do not edit; rerun the script.",
        "// For each op: each schema version (since_version) with its attributes and their types.",
        '#include "onnx/op_attributes.h"',
        "",
        "namespace kiln::onnx_import {",
        "",
        "const std::vector<OpSchemaAttrs>& op_schema_table() {",
        "  using A = AttrType;",
        "  static const std::vector<OpSchemaAttrs> kTable = {",
    ]
    for op in ops:
        for ver in sorted(table[op]):
            attrs = ", ".join('{"%s", A::k%s}' % (k, CPP[t]) for k, t in sorted(table[op][ver].items()))
            lines.append('      {"%s", %d, {%s}},' % (op, ver, attrs))
    lines += ["  };", "  return kTable;", "}", "", "}  // namespace kiln::onnx_import", ""]
    open("src/onnx/op_attributes.cc", "w").write("\n".join(lines))
    print("ops without a schema:", missing)

main()
