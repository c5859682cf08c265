#include "editing/edit_stack.h"

#include "io/errors.h"

namespace mumoe::editing {

void EditStack::push(LogitEdit edit) {
  edits_.resize(applied_);
  edits_.push_back(std::move(edit));
  applied_ = edits_.size();
}

void EditStack::undo() {
  if (!can_undo()) throw UsageError("there is no edit to undo");
  --applied_;
}

void EditStack::redo() {
  if (!can_redo()) throw UsageError("there is no edit to redo");
  ++applied_;
}

void EditStack::clear() {
  edits_.clear();
  applied_ = 0;
}

std::vector<LogitEdit> EditStack::applied() const {
  return {edits_.begin(), edits_.begin() + static_cast<std::ptrdiff_t>(applied_)};
}

nlohmann::json EditStack::to_json() const {
  return {{"edits", editing::to_json(edits_)}, {"applied", applied_}};
}

EditStack EditStack::from_json(const nlohmann::json& json, const std::string& source) {
  EditStack stack;
  stack.edits_ = logit_edits_from_json(json, source);
  int64_t applied = static_cast<int64_t>(stack.edits_.size());
  if (json.is_object() && json.contains("applied")) {
    if (!json.at("applied").is_number_integer()) throw UsageError(source + ": 'applied' is not an integer");
    applied = json.at("applied").get<int64_t>();
  }
  if (applied < 0 || applied > static_cast<int64_t>(stack.edits_.size()))
    throw UsageError(source + ": 'applied' is " + std::to_string(applied) + " but there are " +
                     std::to_string(stack.edits_.size()) + " edits");
  stack.applied_ = static_cast<size_t>(applied);
  return stack;
}

}  // namespace mumoe::editing
