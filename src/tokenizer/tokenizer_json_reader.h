// Reads tokenizer.json through nlohmann's SAX interface so that the BPE vocabulary and merges
// (up to ~450k entries each) stream into flat vectors instead of a DOM of std::map nodes, which
// made loading several times slower. Everything else becomes an ordinary Json DOM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace locus::tokenizer {

struct BpeTables {
  bool has_vocab = false;   // model.vocab was an object
  bool has_merges = false;  // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right), in rank order
};

struct TokenizerJsonDocument {
  Json root;  // the whole file, with model.vocab and model.merges left null when streamed
  BpeTables tables;
};

// Errors name the JSON path of a malformed vocabulary or merge entry.
Expected<TokenizerJsonDocument> read_tokenizer_json(std::string_view text);

}  // namespace locus::tokenizer
