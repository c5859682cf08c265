#include "text/byte_tokenizer.h"

#include "io/errors.h"
#include "text/utf8.h"

namespace mumoe::text {
namespace {

char checked_byte(int32_t id) {
  if (id < 0 || id > 255)
    throw UsageError("token id " + std::to_string(id) + " is not in the byte vocabulary (0..255)");
  return static_cast<char>(static_cast<unsigned char>(id));
}

}  // namespace

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (const int32_t id : ids) out += checked_byte(id);
  return out;
}

std::string ByteTokenizer::token_text(int32_t id) const { return escape_for_display(std::string(1, checked_byte(id))); }

}  // namespace mumoe::text
