// A step's ModelInputBatch as bytes, for the nodes of a multi-node group: node 0 schedules, and
// every other node runs the same step on its ranks from this copy. Host byte order (the nodes
// check at rendezvous that they agree); decode() rejects truncated or inconsistent input
// instead of trusting it.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/model_runner.h"

namespace locus {

std::string encode_batch(const ModelInputBatch& batch);
Expected<ModelInputBatch> decode_batch(std::string_view bytes);

}  // namespace locus
