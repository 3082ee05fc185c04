#include "ft/engine/sequence_state.h"

#include <algorithm>

namespace ft::engine {

namespace {
std::size_t product(const std::vector<int64_t>& shape) {
  std::size_t n = 1;
  for (int64_t d : shape) n *= std::size_t(d);
  return n;
}
}  // namespace

std::size_t LinearState::conv_floats() const { return product(conv_shape); }
std::size_t LinearState::recurrent_floats() const { return product(recurrent_shape); }

SequenceState::SequenceState(std::string fingerprint, std::shared_ptr<KvPool> pool, std::vector<LinearState> linear,
                             std::shared_ptr<Memory> memory)
    : fingerprint_(std::move(fingerprint)), pool_(std::move(pool)), linear_(std::move(linear)),
      memory_(std::move(memory)) {}

std::size_t SequenceState::bytes() const {
  std::size_t n = pool_ ? pages_.size() * pool_->layout().page_bytes() : 0;
  for (const LinearState& l : linear_) n += l.conv.size() + l.recurrent.size();
  return n;
}

Status SequenceState::allocate_linear() {
  for (LinearState& l : linear_) {
    if (l.allocated()) continue;
    FT_ASSIGN_OR_RETURN(l.conv, MemoryBlock::allocate(memory_, l.conv_floats() * sizeof(float)));
    FT_ASSIGN_OR_RETURN(l.recurrent, MemoryBlock::allocate(memory_, l.recurrent_floats() * sizeof(float)));
  }
  return Status::ok();
}

Status SequenceState::reserve(int64_t tokens) {
  FT_RETURN_IF_ERROR(allocate_linear());
  if (!pool_ || tokens <= 0) return Status::ok();
  const KvLayout& layout = pool_->layout();
  // The page holding position() may be shared with a checkpoint taken at position(): copy it
  // before this pass writes into it. Later pages are new.
  const int64_t first = position_ / layout.page_tokens;
  if (position_ % layout.page_tokens != 0 && first < int64_t(pages_.size()) && pages_[std::size_t(first)].use_count() > 1) {
    FT_ASSIGN_OR_RETURN(KvPageRef copy, pool_->copy_of(*pages_[std::size_t(first)]));
    page_data_[std::size_t(first)] = copy->data();
    pages_[std::size_t(first)] = std::move(copy);
  }
  const int64_t need = layout.pages_for(position_ + tokens);
  while (int64_t(pages_.size()) < need) {
    FT_ASSIGN_OR_RETURN(KvPageRef page, pool_->allocate());
    page_data_.push_back(page->data());
    pages_.push_back(std::move(page));
  }
  return Status::ok();
}

void SequenceState::reset() {
  position_ = 0;
  pages_.clear();
  page_data_.clear();
  for (LinearState& l : linear_) {
    if (!l.allocated()) continue;
    memory_->zero(l.conv.data(), l.conv.size());
    memory_->zero(l.recurrent.data(), l.recurrent.size());
  }
}

void SequenceState::set_kv(std::vector<KvPageRef> pages, int64_t tokens) {
  pages_ = std::move(pages);
  page_data_.clear();
  for (const KvPageRef& p : pages_) page_data_.push_back(p->data());
  position_ = tokens;
}

}  // namespace ft::engine
