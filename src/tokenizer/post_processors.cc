// The post-processors of HF tokenizers (processors/*.rs); see post_processors.h.
#include "tokenizer/post_processors.h"

#include <fmt/format.h>

#include <map>

namespace locus::tokenizer {
namespace {

class TemplateProcessor final : public PostProcessor {
 public:
  TemplateProcessor(std::vector<TokenId> prefix, std::vector<TokenId> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<TokenId>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<TokenId> prefix_;
  std::vector<TokenId> suffix_;
};

class NoOpProcessor final : public PostProcessor {
 public:
  void process(std::vector<TokenId>& /*ids*/, bool /*add_special_tokens*/) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<TokenId>& ids, bool add_special_tokens) const override {
    for (const auto& step : steps_)
      step->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// The "single" template: [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id":
// "A", "type_id": 0}}, ...], with special tokens' ids from "special_tokens".
Expected<std::unique_ptr<PostProcessor>> parse_template(const Json& value, std::string_view path) {
  std::string specials_path = json_path(path, "special_tokens");
  std::map<std::string, std::vector<TokenId>, std::less<>> specials;
  if (const Json* list = json_member(value, "special_tokens"); list && !list->is_null()) {
    if (!list->is_object()) return json_type_error(specials_path, "an object", *list);
    for (auto it = list->begin(); it != list->end(); ++it) {
      std::string entry_path = fmt::format("{}[\"{}\"]", specials_path, it.key());
      const Json* ids = json_member(it.value(), "ids");
      if (ids == nullptr || !ids->is_array()) {
        return parse_error(fmt::format("{}.ids: missing or not an array", entry_path));
      }
      std::vector<TokenId> values;
      for (const auto& id : *ids) {
        if (!id.is_number_integer()) return json_type_error(entry_path + ".ids", "integer ids", id);
        values.push_back(id.get<TokenId>());
      }
      specials[it.key()] = std::move(values);
    }
  }
  std::string single_path = json_path(path, "single");
  const Json* single = json_member(value, "single");
  if (single == nullptr) return parse_error(fmt::format("{}: missing", single_path));
  if (!single->is_array())
    return json_type_error(single_path, "an array of template pieces", *single);
  std::vector<TokenId> prefix, suffix;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& piece = (*single)[i];
    std::string piece_path = json_path(single_path, i);
    if (const Json* special = json_member(piece, "SpecialToken")) {
      LOCUS_ASSIGN_OR_RETURN(std::string id,
                             json_string(*special, "id", piece_path + ".SpecialToken"));
      auto it = specials.find(id);
      if (it == specials.end()) {
        return not_found(
            fmt::format("{}: special token '{}' is not in {}", piece_path, id, specials_path));
      }
      auto& target = seen_sequence ? suffix : prefix;
      target.insert(target.end(), it->second.begin(), it->second.end());
    } else if (const Json* sequence = json_member(piece, "Sequence")) {
      LOCUS_ASSIGN_OR_RETURN(std::string id,
                             json_string(*sequence, "id", piece_path + ".Sequence"));
      if (id != "A" || seen_sequence) {
        return unsupported(fmt::format(
            "{}: a single-sequence template must contain sequence A exactly once", piece_path));
      }
      seen_sequence = true;
    } else {
      return parse_error(fmt::format("{}: expected a SpecialToken or Sequence piece", piece_path));
    }
  }
  if (!seen_sequence) {
    return unsupported(fmt::format("{}: the template does not contain sequence A", single_path));
  }
  return make_template_processor(std::move(prefix), std::move(suffix));
}

}  // namespace

std::unique_ptr<PostProcessor> make_template_processor(std::vector<TokenId> prefix,
                                                       std::vector<TokenId> suffix) {
  return std::make_unique<TemplateProcessor>(std::move(prefix), std::move(suffix));
}

Expected<std::unique_ptr<PostProcessor>> parse_post_processor(const Json& value,
                                                              std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(std::string type, json_component_type(value, path, "post-processor"));
  if (type == "TemplateProcessing") return parse_template(value, path);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "Sequence") {
    std::string list_path = json_path(path, "processors");
    const Json* list = json_member(value, "processors");
    if (list == nullptr) return parse_error(fmt::format("{}: missing", list_path));
    if (!list->is_array()) return json_type_error(list_path, "an array", *list);
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LOCUS_ASSIGN_OR_RETURN(auto step, parse_post_processor((*list)[i], json_path(list_path, i)));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  return unsupported(fmt::format(
      "{}: post-processor type '{}' is not supported (supported: TemplateProcessing, ByteLevel, "
      "Sequence)",
      path, type));
}

}  // namespace locus::tokenizer
