// Sequence filters: first/last/length/list/join, sort/unique/reverse/dictsort/items, map,
// select/reject(attr), sum/min/max, batch. Where jinja2 returns a generator, so do these (a
// one-pass iterator without len(), always truthy), so that `|length` after `|selectattr` fails
// as it does in Python.
#include <algorithm>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_attributes.h"
#include "tokenizer/chat_template/jinja_evaluator.h"
#include "tokenizer/chat_template/jinja_filters_internal.h"
#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

Value generator(std::vector<Value> items) {
  return Value::iterator("generator", std::move(items), false);
}

Value filter_first(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("first", a, {});
  if (v.is_iterator() && !v.as_iterator().is_view) {
    IteratorValue& it = v.as_iterator();
    if (it.position < it.items.size()) return it.items[it.position++];
    return Value::undefined("No first item, sequence was empty.");
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value filter_last(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("last", a, {});
  if (v.is_iterator() && !v.as_iterator().is_view)
    throw_type_error("'generator' object is not reversible");
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value filter_length(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("length", a, {});
  return Value(static_cast<int64_t>(python_len(v)));
}

Value filter_list(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("list", a, {});
  return Value::list(iterate(v));
}

Value filter_join(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("join", a, {"d", "attribute"});
  std::string separator = soft_str(b.get(0, Value("")));
  Value attribute = b.get(1);
  std::string out;
  std::vector<Value> items = iterate(v);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += (attribute.is_none() ? items[i] : get_attribute_path(items[i], attribute)).str();
  }
  return Value(std::move(out));
}

// Keys for sort/unique/min/max. `as_lists`: jinja2's sort uses make_multi_attrgetter, whose keys
// are always lists ("a,b" sorts on several attributes), so equal keys never reach `<`.
std::vector<Value> sort_keys(const std::vector<Value>& items, const Value& attribute,
                             bool case_sensitive, bool as_lists = false) {
  std::vector<std::string> parts;
  if (attribute.is_string())
    parts = text::split(attribute.as_string(), std::string(","), -1, false);
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    auto key_of = [&](const Value& attr) {
      Value k = attr.is_none() ? item : get_attribute_path(item, attr);
      return case_sensitive ? k : ignore_case(k);
    };
    if (as_lists || parts.size() > 1) {
      std::vector<Value> multi;
      if (parts.empty()) multi.push_back(key_of(attribute));
      for (const std::string& part : parts)
        multi.push_back(key_of(Value(part)));
      keys.push_back(Value::list(std::move(multi)));
    } else {
      keys.push_back(key_of(attribute));
    }
  }
  return keys;
}

Value filter_sort(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("sort", a, {"reverse", "case_sensitive", "attribute"});
  bool reverse = b.get(0, Value(false)).truthy();
  std::vector<Value> items = iterate(v);
  std::vector<Value> keys = sort_keys(items, b.get(2), b.get(1, Value(false)).truthy(), true);
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? python_less(keys[y], keys[x]) : python_less(keys[x], keys[y]);
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order)
    sorted.push_back(items[i]);
  return Value::list(std::move(sorted));
}

Value filter_unique(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("unique", a, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  std::vector<Value> keys = sort_keys(items, b.get(1), b.get(0, Value(false)).truthy());
  std::vector<Value> seen;
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); ++i) {
    check_hashable(keys[i]);
    bool duplicate = std::any_of(seen.begin(), seen.end(),
                                 [&](const Value& s) { return python_equals(s, keys[i]); });
    if (duplicate) continue;
    seen.push_back(keys[i]);
    out.push_back(items[i]);
  }
  return generator(std::move(out));
}

Value filter_reverse(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("reverse", a, {});
  if (v.is_string()) return slice_value(v, Value::none(), Value::none(), Value(int64_t{-1}));
  if (v.is_number() || v.is_none() || v.is_object() || v.is_callable())
    throw_type_error("argument must be iterable");
  bool is_generator = v.is_iterator() && !v.as_iterator().is_view;
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (is_generator) return Value::list(std::move(items));
  std::string type = v.is_dict()
                         ? "dict_reversekeyiterator"
                         : (v.is_list() && !v.is_tuple() ? "list_reverseiterator" : "reversed");
  return Value::iterator(type, std::move(items), false);
}

Value filter_dictsort(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_dict()) throw_type_error("'" + v.type_name() + "' object has no attribute 'items'");
  std::string by = b.get(1, Value("key")).str();
  if (by != "key" && by != "value")
    throw_type_error("You can only sort by either \"key\" or \"value\"");
  bool case_sensitive = b.get(0, Value(false)).truthy();
  bool reverse = b.get(2, Value(false)).truthy();
  std::vector<std::pair<Value, Value>> entries = v.as_dict().entries();
  auto key = [&](const std::pair<Value, Value>& e) {
    const Value& k = by == "key" ? e.first : e.second;
    return case_sensitive ? k : ignore_case(k);
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reverse ? python_less(key(y), key(x)) : python_less(key(x), key(y));
  });
  std::vector<Value> pairs;
  for (auto& [k, value] : entries)
    pairs.push_back(Value::tuple({k, value}));
  return Value::list(std::move(pairs));
}

Value filter_items(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments("items", a, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) throw_type_error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, value] : v.as_dict().entries())
    pairs.push_back(Value::tuple({k, value}));
  return generator(std::move(pairs));
}

Value filter_map(Evaluator& evaluator, const Value& v, CallArguments& a) {
  std::vector<Value> items = v.truthy() ? iterate(v) : std::vector<Value>{};
  std::vector<Value> out;
  if (a.positional.empty()) {
    Value attribute;
    Value fallback = Value::none();
    for (const auto& [key, value] : a.keyword) {
      if (key == "attribute")
        attribute = value;
      else if (key == "default")
        fallback = value;
      else
        throw_type_error("Unexpected keyword argument '" + key + "'");
    }
    if (attribute.is_undefined()) throw_type_error("map requires a filter argument");
    for (const Value& item : items) {
      Value mapped = get_attribute_path(item, attribute);
      out.push_back(mapped.is_undefined() && !fallback.is_none() ? fallback : mapped);
    }
    return generator(std::move(out));
  }
  std::string name = soft_str(a.positional[0]);
  CallArguments rest{std::vector<Value>(a.positional.begin() + 1, a.positional.end()), a.keyword};
  for (const Value& item : items) {
    CallArguments copy = rest;
    out.push_back(evaluator.apply_filter(name, item, copy));
  }
  return generator(std::move(out));
}

Value select_or_reject(Evaluator& evaluator, const Value& v, CallArguments& a, bool select,
                       bool by_attribute) {
  std::vector<Value> items = v.truthy() ? iterate(v) : std::vector<Value>{};
  size_t offset = 0;
  Value attribute;
  if (by_attribute) {
    if (a.positional.empty()) throw_type_error("Missing parameter for attribute name");
    attribute = a.positional[0];
    offset = 1;
  }
  bool has_test = a.positional.size() > offset;
  std::string test_name = has_test ? soft_str(a.positional[offset]) : "";
  CallArguments test_args{
      has_test ? std::vector<Value>(a.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1,
                                    a.positional.end())
               : std::vector<Value>{},
      a.keyword};
  std::vector<Value> out;
  for (const Value& item : items) {
    Value subject = by_attribute ? get_attribute_path(item, attribute) : item;
    bool passed;
    if (has_test) {
      CallArguments copy = test_args;
      passed = evaluator.apply_test(test_name, subject, copy);
    } else {
      passed = subject.truthy();
    }
    if (passed == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value filter_select(Evaluator& e, const Value& v, CallArguments& a) {
  return select_or_reject(e, v, a, true, false);
}
Value filter_reject(Evaluator& e, const Value& v, CallArguments& a) {
  return select_or_reject(e, v, a, false, false);
}
Value filter_selectattr(Evaluator& e, const Value& v, CallArguments& a) {
  return select_or_reject(e, v, a, true, true);
}
Value filter_rejectattr(Evaluator& e, const Value& v, CallArguments& a) {
  return select_or_reject(e, v, a, false, true);
}

Value filter_sum(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("sum", a, {"attribute", "start"});
  Value attribute = b.get(0);
  Value total = b.get(1, Value(int64_t{0}));
  for (const Value& item : iterate(v)) {
    total = binary_operation(BinaryOp::kAdd, total,
                             attribute.is_none() ? item : get_attribute_path(item, attribute));
  }
  return total;
}

Value min_or_max(const Value& v, CallArguments& a, const char* name, bool want_max) {
  BoundArguments b(name, a, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<Value> keys = sort_keys(items, b.get(1), b.get(0, Value(false)).truthy());
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    if (want_max ? python_less(keys[best], keys[i]) : python_less(keys[i], keys[best])) best = i;
  }
  return items[best];
}

Value filter_min(Evaluator&, const Value& v, CallArguments& a) {
  return min_or_max(v, a, "min", false);
}
Value filter_max(Evaluator&, const Value& v, CallArguments& a) {
  return min_or_max(v, a, "max", true);
}

Value filter_batch(Evaluator&, const Value& v, CallArguments& a) {
  BoundArguments b("batch", a, {"linecount", "fill_with"});
  int64_t count = require_int(b.require(0, "linecount"), "linecount");
  if (count <= 0) throw_type_error("batch size must be positive");
  Value fill = b.get(1);
  std::vector<Value> batches;
  std::vector<Value> current;
  for (const Value& item : iterate(v)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == count) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (!fill.is_none()) {
      while (static_cast<int64_t>(current.size()) < count)
        current.push_back(fill);
    }
    batches.push_back(Value::list(std::move(current)));
  }
  return generator(std::move(batches));
}

}  // namespace

void register_sequence_filters(FilterTable& table) {
  table.insert({
      {"first", filter_first},
      {"last", filter_last},
      {"length", filter_length},
      {"count", filter_length},
      {"list", filter_list},
      {"join", filter_join},
      {"sort", filter_sort},
      {"unique", filter_unique},
      {"reverse", filter_reverse},
      {"dictsort", filter_dictsort},
      {"items", filter_items},
      {"map", filter_map},
      {"select", filter_select},
      {"reject", filter_reject},
      {"selectattr", filter_selectattr},
      {"rejectattr", filter_rejectattr},
      {"sum", filter_sum},
      {"min", filter_min},
      {"max", filter_max},
      {"batch", filter_batch},
  });
}

}  // namespace locus::jinja
