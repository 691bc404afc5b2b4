// SentencePiece models (tokenizer.model: a serialized sentencepiece.ModelProto; Llama 2, Mistral)
// through Debian's libsentencepiece, compiled into its own target, kiln_llm_sentencepiece, that
// only processes without libprotobuf link: Debian's libsentencepiece.so.0 carries its own copy of
// protobuf-lite and exports its symbols, so in a process that also loads libprotobuf.so (anything
// linking kiln_onnx: the kiln CLI, kiln_tests) the two copies interpose and the process crashes in
// static initialization (docs/decisions/0048). A program that links it calls
// register_sentencepiece() once at start-up; load_tokenizer() then reads tokenizer.model files.
#pragma once

#include <memory>
#include <string>

#include "llm/tokenizer.h"

namespace kiln::llm {

// Loads `path` with libsentencepiece: InvalidModel when it is no SentencePiece model.
StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path);

// set_sentencepiece_loader(load_sentencepiece_model).
void register_sentencepiece();

}  // namespace kiln::llm
