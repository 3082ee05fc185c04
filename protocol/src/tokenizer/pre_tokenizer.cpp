#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

namespace ft::protocol::tok {
namespace {

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<SplitBehavior> parse_behavior(const std::string& b) {
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return unsupported("tokenizer.json: Split behavior " + b);
}

struct Span {
  std::size_t begin, end;
  bool is_match;
};

}  // namespace

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& spec) {
  PreTokenizer p;
  if (!spec.is_null()) FT_RETURN_IF_ERROR(p.add(spec));
  return p;
}

Status PreTokenizer::add(const nlohmann::json& spec) {
  const std::string type = spec.value("type", std::string());
  if (type == "Sequence") {
    for (const auto& s : spec.value("pretokenizers", nlohmann::json::array())) FT_RETURN_IF_ERROR(add(s));
    return Status::ok();
  }
  if (type == "Split") {
    Stage st;
    const auto& pattern = spec.value("pattern", nlohmann::json());
    if (pattern.contains("Regex")) {
      FT_ASSIGN_OR_RETURN(st.regex, Regex::compile(pattern["Regex"].get<std::string>()));
    } else if (pattern.contains("String")) {
      FT_ASSIGN_OR_RETURN(st.regex, Regex::literal(pattern["String"].get<std::string>()));
    } else {
      return corrupt("tokenizer.json: Split pre-tokenizer without a Regex or String pattern");
    }
    FT_ASSIGN_OR_RETURN(st.behavior, parse_behavior(spec.value("behavior", std::string("Isolated"))));
    st.invert = spec.value("invert", false);
    stages_.push_back(std::move(st));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    // The byte -> character mapping itself needs no stage: encoding works on raw bytes.
    if (spec.value("add_prefix_space", false)) stages_.push_back(Stage{Stage::kPrefixSpace, {}, {}, false});
    if (spec.value("use_regex", true)) {
      Stage st;
      FT_ASSIGN_OR_RETURN(st.regex, Regex::compile(kGpt2Pattern));
      stages_.push_back(std::move(st));
    }
    return Status::ok();
  }
  if (type == "Digits") {
    // HF splits on char::is_numeric (= \p{N}); runs of digits stay together unless individual.
    Stage st;
    FT_ASSIGN_OR_RETURN(st.regex, Regex::compile("\\p{N}"));
    st.behavior = spec.value("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
    stages_.push_back(std::move(st));
    return Status::ok();
  }
  return unsupported("tokenizer.json: pre_tokenizer " + (type.empty() ? spec.dump() : type));
}

void PreTokenizer::run_from(std::size_t stage, std::string_view piece, FunctionRef<void(std::string_view)> emit) const {
  if (stage == stages_.size()) {
    emit(piece);
    return;
  }
  const Stage& s = stages_[stage];
  auto next = [&](std::string_view p) { run_from(stage + 1, p, emit); };
  if (s.kind == Stage::kPrefixSpace) {
    if (piece[0] == ' ') {
      next(piece);
    } else {
      std::string spaced;
      spaced.reserve(piece.size() + 1);
      spaced.push_back(' ');
      spaced.append(piece);
      next(spaced);
    }
    return;
  }
  if (s.behavior != SplitBehavior::kIsolated || s.invert) {
    split_general(s, piece, next);
    return;
  }
  // Isolated (every file in use): matches and the gaps between them are all pieces.
  std::size_t prev = 0;
  s.regex.for_each_match(piece, [&](std::size_t b, std::size_t e) {
    if (b > prev) next(piece.substr(prev, b - prev));
    if (e > b) next(piece.substr(b, e - b));
    prev = e;
  });
  if (prev < piece.size()) next(piece.substr(prev));
}

// The other behaviors, transcribed from HF's NormalizedString::split.
void PreTokenizer::split_general(const Stage& s, std::string_view piece,
                                 FunctionRef<void(std::string_view)> next) const {
  std::vector<Span> spans;
  std::size_t prev = 0;
  s.regex.for_each_match(piece, [&](std::size_t b, std::size_t e) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  });
  if (prev != piece.size()) spans.push_back({prev, piece.size(), false});
  if (s.invert)
    for (auto& sp : spans) sp.is_match = !sp.is_match;

  std::vector<Span> out;
  switch (s.behavior) {
    case SplitBehavior::kIsolated:
      out = spans;
      break;
    case SplitBehavior::kRemoved:
      for (const auto& sp : spans)
        if (!sp.is_match) out.push_back(sp);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.is_match && !previous_match && !out.empty()) {
          out.back().end = sp.end;
        } else {
          out.push_back(sp);
        }
        previous_match = sp.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.is_match == previous_match && !out.empty()) {
          out.back().end = sp.end;
        } else {
          out.push_back(sp);
        }
        previous_match = sp.is_match;
      }
      break;
    }
  }
  for (const auto& sp : out)
    if (sp.end > sp.begin) next(piece.substr(sp.begin, sp.end - sp.begin));
}

}  // namespace ft::protocol::tok
