// The cache's chunk decoder: a run shape from the first bytes, the nine blobs from the rest.
// decode_chunk must return a chunk that passes chunk_problem, or throw ChunkFormatError; a chunk
// it returns must survive encode_coefficients and decoding again unchanged.
#include <cstdlib>
#include <cstring>

#include "cache/chunk_codec.h"

namespace {

struct Reader {
  const uint8_t* p;
  size_t left;
  uint8_t byte() {
    if (!left) return 0;
    --left;
    return *p++;
  }
  mumoe::cache::BlobView blob() {
    const size_t n = std::min<size_t>(left, static_cast<size_t>(byte()) * 8 + byte());
    mumoe::cache::BlobView b{p, n};
    p += n;
    left -= n;
    return b;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mumoe::cache;
  Reader r{data, size};
  RunInfo info;
  info.sample_count = r.byte();
  info.chunk_size = 1 + r.byte() % 16;
  info.input_dim = r.byte() % 8;
  info.output_dim = r.byte() % 8;
  for (int m = 0, modes = 1 + r.byte() % 3; m < modes; ++m) info.expert_dims.push_back(1 + r.byte() % 16);
  info.attribute_count = r.byte() % 4;
  StoredChunk s;
  const int64_t index = r.byte() % 20;
  s.first_sample = r.byte();
  s.count = r.byte();
  s.labels = r.blob();
  s.predictions = r.blob();
  s.scores = r.blob();
  s.inputs = r.blob();
  s.attributes = r.blob();
  s.coef_offsets = r.blob();
  s.coef_indices = r.blob();
  s.coef_values = r.blob();
  s.coef_left_to_model = r.blob();
  if (!run_info_problem(info).empty()) return 0;
  ChunkRecord chunk;
  try {
    chunk = decode_chunk(info, index, s);
  } catch (const ChunkFormatError&) {
    return 0;
  }
  if (!chunk_problem(info, chunk).empty()) std::abort();  // decoded but invalid: a bug
  // A valid chunk, encoded as put_chunk encodes it (compact forms where they apply), must decode
  // to the same coefficients.
  const CoefficientBlobs coef = encode_coefficients(chunk.coefficients, info.expert_dims, chunk.left_to_model);
  StoredChunk again = s;
  again.coef_offsets = raw_bytes(coef.offsets);
  again.coef_indices = raw_bytes(coef.indices);
  again.coef_values = coef.values_blob();
  again.coef_left_to_model = raw_bytes(coef.left_to_model);
  ChunkRecord back;
  try {
    back = decode_chunk(info, index, again);
  } catch (const ChunkFormatError&) {
    std::abort();  // the encoder wrote something its decoder refuses
  }
  if (chunk.left_to_model != back.left_to_model) std::abort();
  for (size_t m = 0; m < chunk.coefficients.size(); ++m) {
    const auto &a = chunk.coefficients[m], &b = back.coefficients[m];
    if (a.offsets != b.offsets || a.indices != b.indices || a.values != b.values) std::abort();
  }
  return 0;
}
