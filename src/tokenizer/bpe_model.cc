// BPE as in HF tokenizers (models/bpe/model.rs + word.rs); see bpe_model.h.
#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/bpe_word_cache.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

// HF caches words shorter than this many bytes; longer ones are rare and would crowd the cache.
constexpr size_t kMaxCachedWordBytes = 256;
// SentencePiece's word-start marker U+2581.
constexpr std::string_view kMetaspace = "\xE2\x96\x81";

struct Symbol {
  TokenId id;  // -1 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// A possible merge of the symbol at `pos` with its right neighbour into `new_id`.
struct Candidate {
  int32_t rank;
  int32_t pos;
  TokenId new_id;
};

// Orders the heap so that its top is the lowest rank, then the leftmost position.
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string buffer;
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

Expected<std::optional<std::string>> optional_affix(const Json& model, std::string_view key,
                                                    std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(auto value, json_optional_string(model, key, path));
  // HF writes "" for "none" (Qwen's tokenizer.json); an empty affix changes nothing either way.
  if (value && value->empty()) value.reset();
  return value;
}

// Vocabulary and merges that were not streamed out of the file are read from the DOM: "vocab"
// {"token": id} and "merges" of "left right" strings (older files) or [left, right] pairs
// (newer files, which allow spaces inside tokens).
Status read_tables_from_dom(const Json& model, std::string_view path, BpeTables& tables) {
  if (!tables.has_vocab) {
    std::string vocab_path = json_path(path, "vocab");
    const Json* vocab = json_member(model, "vocab");
    if (vocab == nullptr)
      return parse_error(fmt::format("{}: missing (expected an object)", vocab_path));
    if (!vocab->is_object()) return json_type_error(vocab_path, "an object of token → id", *vocab);
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer()) {
        return json_type_error(fmt::format("{}[\"{}\"]", vocab_path, it.key()), "an integer id",
                               it.value());
      }
      tables.vocab.emplace_back(it.key(), it.value().get<int64_t>());
    }
    tables.has_vocab = true;
  }
  const Json* merges = json_member(model, "merges");
  if (tables.has_merges || merges == nullptr || merges->is_null()) return Status::ok();
  std::string merges_path = json_path(path, "merges");
  if (!merges->is_array()) return json_type_error(merges_path, "an array", *merges);
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const Json& entry = (*merges)[rank];
    std::string entry_path = json_path(merges_path, rank);
    if (entry.is_string()) {
      const auto& text = entry.get_ref<const std::string&>();
      size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return parse_error(
            fmt::format("{}: '{}' is not two tokens separated by one space", entry_path, text));
      }
      tables.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      tables.merges.emplace_back(entry[0].get<std::string>(), entry[1].get<std::string>());
    } else {
      return json_type_error(entry_path, "a \"left right\" string or a [left, right] pair", entry);
    }
  }
  tables.has_merges = true;
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<BpeModel>> BpeModel::parse(const Json& model, std::string_view path,
                                                    BpeTables* tables) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  if (const Json* dropout = json_member(model, "dropout"); dropout && !dropout->is_null()) {
    if (!dropout->is_number())
      return json_type_error(json_path(path, "dropout"), "a number", *dropout);
    double p = dropout->get<double>();
    if (p < 0.0 || p > 1.0) {
      return parse_error(fmt::format("{}: {} is not a probability", json_path(path, "dropout"), p));
    }
    if (p > 0.0) {
      return unsupported(fmt::format(
          "{}: BPE dropout {} drops merges at random (a training technique); locus encodes "
          "deterministically",
          json_path(path, "dropout"), p));
    }
  }
  LOCUS_ASSIGN_OR_RETURN(m->unk_token_, json_optional_string(model, "unk_token", path));
  LOCUS_ASSIGN_OR_RETURN(m->continuing_subword_prefix_,
                         optional_affix(model, "continuing_subword_prefix", path));
  LOCUS_ASSIGN_OR_RETURN(m->end_of_word_suffix_, optional_affix(model, "end_of_word_suffix", path));
  LOCUS_ASSIGN_OR_RETURN(m->fuse_unk_, json_bool(model, "fuse_unk", path, false));
  LOCUS_ASSIGN_OR_RETURN(m->byte_fallback_, json_bool(model, "byte_fallback", path, false));
  LOCUS_ASSIGN_OR_RETURN(m->ignore_merges_, json_bool(model, "ignore_merges", path, false));
  m->has_affixes_ = m->continuing_subword_prefix_.has_value() || m->end_of_word_suffix_.has_value();

  BpeTables from_dom;
  if (tables == nullptr) tables = &from_dom;
  LOCUS_RETURN_IF_ERROR(read_tables_from_dom(model, path, *tables));

  // Vocabulary: {"token": id, ...}.
  m->vocab_.reserve(tables->vocab.size());
  int64_t max_id = -1;
  for (const auto& [token, id] : tables->vocab) {
    if (id < 0 || id >= (int64_t{1} << 31) - 1) {
      return parse_error(
          fmt::format("{}[\"{}\"]: id {} out of range", json_path(path, "vocab"), token, id));
    }
    m->vocab_.insert(token, static_cast<TokenId>(id));
    max_id = std::max(max_id, id);
  }
  m->tokens_.resize(static_cast<size_t>(max_id + 1));
  m->has_token_.assign(static_cast<size_t>(max_id + 1), false);
  for (auto& [token, id] : tables->vocab) {
    m->tokens_[static_cast<size_t>(id)] = std::move(token);
    m->has_token_[static_cast<size_t>(id)] = true;
  }

  // Merges: the rank of a merge is its index.
  std::string merges_path = json_path(path, "merges");
  m->merges_.reserve(tables->merges.size());
  size_t prefix_length = m->continuing_subword_prefix_ ? m->continuing_subword_prefix_->size() : 0;
  std::string merged;
  for (size_t rank = 0; rank < tables->merges.size(); ++rank) {
    std::string_view left = tables->merges[rank].first, right = tables->merges[rank].second;
    std::string entry_path = json_path(merges_path, rank);
    auto left_id = m->vocab_.find(left);
    if (!left_id)
      return not_found(fmt::format("{}: token '{}' is not in the vocabulary", entry_path, left));
    auto right_id = m->vocab_.find(right);
    if (!right_id)
      return not_found(fmt::format("{}: token '{}' is not in the vocabulary", entry_path, right));
    if (prefix_length > 0 && right.substr(0, prefix_length) != *m->continuing_subword_prefix_) {
      return parse_error(
          fmt::format("{}: right token '{}' lacks the continuing_subword_prefix '{}'", entry_path,
                      right, *m->continuing_subword_prefix_));
    }
    merged.assign(left);
    merged.append(right.substr(prefix_length));
    auto merged_id = m->vocab_.find(merged);
    if (!merged_id) {
      return not_found(
          fmt::format("{}: merged token '{}' is not in the vocabulary", entry_path, merged));
    }
    m->merges_.insert(*left_id, *right_id, {static_cast<int32_t>(rank), *merged_id});
  }
  tables->vocab.clear();
  tables->merges.clear();

  if (m->unk_token_) m->unk_id_ = m->vocab_.find(*m->unk_token_).value_or(-1);
  for (size_t c = 0; c < m->ascii_ids_.size(); ++c) {
    m->ascii_ids_[c] = m->vocab_.find(std::string(1, static_cast<char>(c))).value_or(-1);
  }
  for (size_t b = 0; b < m->byte_fallback_ids_.size(); ++b) {
    m->byte_fallback_ids_[b] = m->vocab_.find(fmt::format("<0x{:02X}>", b)).value_or(-1);
  }
  // With ignore_merges a cut piece could be looked up whole where HF merges the whole word.
  m->split_before_metaspace_ = !m->ignore_merges_ && m->metaspace_cuts_are_safe();
  m->cache_owner_ = next_word_cache_owner_id();
  return m;
}

void BpeModel::enable_byte_level_input() {
  if (byte_level_ready_) return;
  for (size_t b = 0; b < byte_ids_.size(); ++b) {
    byte_ids_[b] = vocab_.find(utf8::encode(byte_to_char(static_cast<uint8_t>(b)))).value_or(-1);
  }
  if (ignore_merges_) {
    // ignore_merges looks whole pre-tokens up in the vocabulary; key it by the raw bytes.
    byte_vocab_.reserve(vocab_.size());
    std::string raw;
    for (size_t id = 0; id < tokens_.size(); ++id) {
      raw.clear();
      if (has_token_[id] && append_bytes_of_byte_level_token(raw, tokens_[id])) {
        byte_vocab_.insert(raw, static_cast<TokenId>(id));
      }
    }
  }
  byte_level_ready_ = true;
}

bool BpeModel::metaspace_cuts_are_safe() const {
  if (has_affixes_ || !vocab_.find(kMetaspace)) return false;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!has_token_[id]) continue;
    std::string_view token = tokens_[id];
    for (size_t at = token.find(kMetaspace, 1); at != std::string_view::npos;
         at = token.find(kMetaspace, at + 1)) {
      // "▁" after another character inside a token: that token would span a cut.
      if (at < kMetaspace.size() ||
          token.compare(at - kMetaspace.size(), kMetaspace.size(), kMetaspace) != 0) {
        return false;
      }
    }
  }
  return true;
}

TokenId BpeModel::symbol_id(std::string_view symbol) const {
  if (symbol.size() == 1 && static_cast<unsigned char>(symbol[0]) < 0x80) {
    return ascii_ids_[static_cast<unsigned char>(symbol[0])];
  }
  return vocab_.find(symbol).value_or(-1);
}

bool BpeModel::tokenize(std::string_view word, bool byte_level, std::vector<TokenId>& out) const {
  if (word.empty()) return true;
  if (byte_level && !byte_level_ready_) {
    // Not prepared for raw bytes (no ByteLevel pre-tokenizer was declared): map them here.
    std::string mapped;
    append_byte_level_chars(mapped, word);
    return tokenize(mapped, false, out);
  }
  if (!byte_level && split_before_metaspace_ && word.size() > kMaxCachedWordBytes / 4) {
    // SentencePiece-style input arrives as one long "word" (no pre-tokenizer splits it); cut it
    // before each "▁" that follows another character. No token spans such a cut (checked at
    // load), so BPE on the pieces gives exactly BPE on the whole, and the pieces hit the cache.
    size_t start = 0;
    for (size_t at = word.find(kMetaspace, 1); at != std::string_view::npos;
         at = word.find(kMetaspace, at + kMetaspace.size())) {
      if (at >= kMetaspace.size() &&
          word.compare(at - kMetaspace.size(), kMetaspace.size(), kMetaspace) == 0) {
        continue;
      }
      if (!tokenize_piece(word.substr(start, at - start), false, out)) return false;
      start = at;
    }
    return tokenize_piece(word.substr(start), false, out);
  }
  return tokenize_piece(word, byte_level, out);
}

bool BpeModel::tokenize_piece(std::string_view word, bool byte_level,
                              std::vector<TokenId>& out) const {
  // The cache comes first: it is small and hot, while the vocabulary lookup that ignore_merges
  // asks for touches a multi-megabyte table. Words found in the vocabulary are cached too, so
  // the order does not change any result.
  WordCache* cache = nullptr;
  if (word.size() < kMaxCachedWordBytes) {
    cache = &thread_word_cache(cache_owner_, byte_level);
    const TokenId* ids = nullptr;
    size_t count = 0;
    if (cache->find(word, ids, count)) {
      out.insert(out.end(), ids, ids + count);
      return true;
    }
  }
  if (ignore_merges_) {
    // HF: a pre-token that is a whole vocabulary entry is that token, merges or not.
    if (auto id = byte_level ? byte_vocab_.find(word) : vocab_.find(word)) {
      out.push_back(*id);
      if (cache != nullptr) cache->insert(word, &*id, 1);
      return true;
    }
  }
  size_t mark = out.size();
  bool missing_unk = false;
  merge_word(word, byte_level, out, missing_unk);
  if (missing_unk) return false;
  if (cache != nullptr) cache->insert(word, out.data() + mark, out.size() - mark);
  return true;
}

void BpeModel::merge_word(std::string_view word, bool byte_level, std::vector<TokenId>& out,
                          bool& missing_unk) const {
  Scratch& scratch = thread_scratch();
  auto& symbols = scratch.symbols;
  symbols.clear();
  auto add = [&](TokenId id) {
    auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
  };
  // A pending unk token, as in HF's merge_word: consecutive unknowns fuse when fuse_unk is set.
  bool pending_unk = false;
  auto known = [&](TokenId id) {
    if (pending_unk) {
      add(unk_id_);
      pending_unk = false;
    }
    add(id);
  };
  auto unknown = [&](std::string_view symbol) {
    if (byte_fallback_) {
      bool all_bytes_known = true;
      for (char b : symbol)
        all_bytes_known &= byte_fallback_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all_bytes_known) {
        // HF adds these without flushing a pending unk first; the order follows it.
        for (char b : symbol)
          add(byte_fallback_ids_[static_cast<uint8_t>(b)]);
        return;
      }
    }
    if (!unk_token_) return;  // the character is dropped
    if (unk_id_ < 0) {
      missing_unk = true;
      return;
    }
    if (pending_unk && !fuse_unk_) add(unk_id_);
    pending_unk = true;
  };

  if (!has_affixes_ && byte_level) {
    for (char c : word) {
      auto b = static_cast<uint8_t>(c);
      if (byte_ids_[b] >= 0) {
        known(byte_ids_[b]);
      } else {
        unknown(utf8::encode(byte_to_char(b)));
      }
    }
  } else if (!has_affixes_) {
    size_t i = 0;
    while (i < word.size()) {
      size_t length = utf8::sequence_length(static_cast<unsigned char>(word[i]));
      std::string_view symbol = word.substr(i, length);
      TokenId id = symbol_id(symbol);
      if (id >= 0) {
        known(id);
      } else {
        unknown(symbol);
      }
      i += length;
    }
  } else {
    std::string mapped;
    std::string_view text = word;
    if (byte_level) {
      append_byte_level_chars(mapped, word);
      text = mapped;
    }
    std::string& symbol = scratch.buffer;
    size_t i = 0;
    while (i < text.size()) {
      size_t length = utf8::sequence_length(static_cast<unsigned char>(text[i]));
      symbol.clear();
      if (i > 0 && continuing_subword_prefix_) symbol += *continuing_subword_prefix_;
      symbol.append(text.substr(i, length));
      if (i + length == text.size() && end_of_word_suffix_) symbol += *end_of_word_suffix_;
      TokenId id = vocab_.find(symbol).value_or(-1);
      if (id >= 0) {
        known(id);
      } else {
        unknown(symbol);
      }
      i += length;
    }
  }
  if (pending_unk) add(unk_id_);
  if (symbols.empty()) return;

  // Merge the lowest-rank adjacent pair first (leftmost on ties) until none is in the merges.
  auto& heap = scratch.heap;
  heap.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* merge = merges_.find(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({merge->rank, static_cast<int32_t>(i), merge->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), LaterCandidate{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterCandidate{});
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.id < 0 || left.next < 0) continue;
    auto right_index = static_cast<size_t>(left.next);
    const Symbol right = symbols[right_index];
    // A stale entry: one side merged since it was queued.
    const auto* current = merges_.find(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    symbols[right_index].id = -1;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* merge = merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        heap.push_back({merge->rank, left.prev, merge->new_id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
      }
    }
    if (left.next >= 0) {
      if (const auto* merge = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        heap.push_back({merge->rank, top.pos, merge->new_id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    out.push_back(symbols[static_cast<size_t>(i)].id);
  }
}

}  // namespace locus::tokenizer
