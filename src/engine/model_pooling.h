// Reading a model's pooling from its files (nanoinfer/embedding.h's ModelPooling), for
// open_model: a directory's sentence-transformers modules, a GGUF file's pooling_type.
#pragma once

#include "engine/model_source.h"
#include "nanoinfer/embedding.h"

namespace nanoinfer {

// Throws Error for a present but malformed modules.json or pooling config; a file that asks
// for a pooling not computed here is reported in ModelPooling::unsupported, not refused (the
// model still generates).
ModelPooling read_model_pooling(const ModelSource& src);

// The files of a directory that declare its pooling, relative to it ("modules.json",
// "1_Pooling/config.json"), those present: what a converted copy of the model carries over.
std::vector<std::string> pooling_files(const ModelSource& src);

}  // namespace nanoinfer
