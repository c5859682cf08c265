// Content hashes that key the analysis cache: a run is reused only for the same bytes of model
// and data, whatever their paths or timestamps say. XXH3-128 (Debian's libxxhash): fast enough
// to hash the 47 MB Fashion-MNIST training images in ~10 ms, and collisions are not a concern
// for a cache key (this is not a security boundary).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::analysis {

/// 32 hex digits of the file's bytes. Throws FileError when it cannot be read.
std::string hash_file(const std::string& path);

/// 32 hex digits over the tensors' dtypes, shapes and bytes (undefined tensors count as empty).
std::string hash_tensors(const std::vector<torch::Tensor>& tensors);

/// A non-zero 64-bit XXH3 checksum of a tensor's dtype and bytes: how a chunk that leaves a mode's
/// coefficients to the model (cache::ChunkRecord::left_to_model) knows the values it was
/// extracted with. Detects changed bits (another machine's arithmetic), not tampering.
uint64_t values_checksum(const torch::Tensor& values);

}  // namespace mumoe::analysis
