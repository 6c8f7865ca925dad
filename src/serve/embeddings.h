// POST /v1/embeddings (OpenAI's shape): the request parsed and checked, the inputs embedded in
// one batched call (nanoinfer/embedding.h), the response written.
#pragma once

#include <string>
#include <string_view>

#include "nanoinfer/open_model.h"

namespace nanoinfer::serve {

// Answers one request body with the response JSON. `pooling_error` non-empty: the model asks
// for a pooling this engine does not compute (every request gets it as a 400). Throws
// ApiError: 400 for malformed JSON, an unknown field, an input that is empty, of the wrong
// type, out of the vocabulary or longer than the context (naming its index), dimensions outside
// [1, hidden size], an encoding_format other than float or base64; 404 for another model.
// The request's "model" when the body is a JSON object with a string there, else "" (the
// default model, whose embeddings_response then refuses the body naming its problem).
std::string embeddings_model(std::string_view body);

std::string embeddings_response(std::string_view body, const OpenedModel& m, Pooling pooling,
                                const std::string& pooling_error, const std::string& model_id);

}  // namespace nanoinfer::serve
