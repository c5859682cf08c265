// The cache opener and the repair on arbitrary files at a --cache path: open (or refuse with a
// FileError, never moving the file unless it is a cache of ours), then check and repair every row.
#include <cstdio>

#include "cache/analysis_cache.h"
#include "cache/cache_repair.h"
#include "fuzz_input.h"
#include "io/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size, ".sqlite");
  for (const char* side : {"-wal", "-shm", "-journal"}) std::remove((path + side).c_str());
  mumoe::cache::CacheOpenReport report;
  try {
    auto cache = mumoe::cache::AnalysisCache::open(path, &report);
    mumoe::cache::check_cache(*cache, /*repair=*/true);
  } catch (const mumoe::Error&) {
  }
  if (report.set_aside)  // a damaged cache of ours was moved: keep $TMPDIR from filling up
    for (const char* side : {"", "-wal", "-shm", "-journal"}) std::remove((report.set_aside_path + side).c_str());
  return 0;
}
