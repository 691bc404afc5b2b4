// Shape rules for sequence/optional ops and TfIdfVectorizer. A sequence value's dtype is its
// element dtype and it has no tensor shape (nullopt); element shapes are not tracked.
#include <algorithm>

#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

// Output 0 is a sequence/optional (or an element of one) with input 0's element dtype.
Status element_dtype_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), std::nullopt);
  return Status::Ok();
}

Status sequence_empty_rule(ShapeContext& ctx) {
  ctx.set_output(0, dtype_from_onnx_code(ctx.node().attr_int("dtype", 1)), std::nullopt);
  return Status::Ok();
}

Status sequence_length_rule(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kInt64, SymShape{});
  return Status::Ok();
}

Status has_element_rule(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kBool, SymShape{});
  return Status::Ok();
}

Status sequence_map_rule(ShapeContext& ctx) {
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, DataType::kUndefined, std::nullopt);
  return Status::Ok();
}

// Operator TfIdfVectorizer: [C] for 1-D input, [N, C] for [N, L]; C = max(ngram_indexes) + 1.
Status tfidf_rule(ShapeContext& ctx) {
  const auto idx = ctx.node().attr_ints("ngram_indexes");
  const Dim c = idx.empty() ? Dim{} : Dim::known(*std::max_element(idx.begin(), idx.end()) + 1);
  const auto& x = ctx.shape(0);
  if (!x) {
    ctx.set_output(0, DataType::kFloat32, std::nullopt);
  } else if (x->size() == 1) {
    ctx.set_output(0, DataType::kFloat32, SymShape{c});
  } else {
    ctx.set_output(0, DataType::kFloat32, SymShape{(*x)[0], c});
  }
  return Status::Ok();
}

}  // namespace

void register_sequence_shape_rules(ShapeRuleTable& t) {
  for (OpKind op : {OpKind::kSequenceConstruct, OpKind::kSequenceInsert, OpKind::kSequenceErase, OpKind::kSequenceAt,
                    OpKind::kSplitToSequence, OpKind::kConcatFromSequence, OpKind::kOptional,
                    OpKind::kOptionalGetElement})
    t.add(op, element_dtype_rule);
  t.add(OpKind::kSequenceEmpty, sequence_empty_rule);
  t.add(OpKind::kSequenceLength, sequence_length_rule);
  t.add(OpKind::kOptionalHasElement, has_element_rule);
  t.add(OpKind::kSequenceMap, sequence_map_rule);
  t.add(OpKind::kTfIdfVectorizer, tfidf_rule);
}

}  // namespace kiln::ir
