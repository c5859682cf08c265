// mumoe-bench-folder: extraction from a streamed image folder (folder:DIR, e.g. ImageNet's 50,000
// validation images) through an image classifier — decoding, the eval transform, backbone, μMoE
// head and the cache writes, i.e. what `mumoe analyze` does — with the process's resident memory
// sampled at every tenth of the way, to show that it stays flat however many images there are.
//
// Usage: mumoe-bench-folder MODEL DIR --cache FILE [--preset NAME] [--threads 2] [--chunk 500]
//                           [--stop-after FRACTION]
// --stop-after cancels once that fraction is done (as Esc would); run again to resume.
// Prints a line per tenth (samples, seconds, images/s, RSS MB) and a JSON summary line.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>

#include "analysis/analysis_session.h"
#include "io/allocator_tuning.h"
#include "io/errors.h"

namespace {

// VmRSS or VmHWM (peak) of this process in MB, from /proc/self/status.
double memory_mb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mumoe::io::tune_allocator_for_tensors();  // as the programs do
  if (argc < 3) {
    std::cerr << "usage: mumoe-bench-folder MODEL DIR --cache FILE [--preset NAME] [--threads N] [--chunk N] "
                 "[--stop-after FRACTION]\n";
    return 1;
  }
  mumoe::analysis::SessionOptions options;
  options.model_path = argv[1];
  options.data_spec = std::string("folder:") + argv[2];
  int threads = 2;
  double stop_after = 2;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--cache") options.cache_path = argv[i + 1];
    else if (flag == "--preset") options.overrides.backbone_preset = argv[i + 1];
    else if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    else if (flag == "--chunk") options.chunk_size = std::stoll(argv[i + 1]);
    else if (flag == "--stop-after") stop_after = std::stod(argv[i + 1]);
    else { std::cerr << "unknown option " << flag << "\n"; return 1; }
  }
  try {
    torch::set_num_threads(threads);
    const auto open_start = std::chrono::steady_clock::now();
    auto session = mumoe::analysis::AnalysisSession::open(options);
    const double open_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - open_start).count();
    std::cout << "opened " << session->sample_count() << " images in " << open_seconds << " s; RSS "
              << memory_mb("VmRSS") << " MB\n";
    int64_t next_report = 0;
    bool cancelled = false;
    mumoe::analysis::ExtractionSummary summary;
    try {
      summary = session->extract([&](const mumoe::analysis::ExtractionProgress& p) {
        if (p.samples_done * 10 >= next_report * p.samples_total) {
          std::cout << "  " << p.samples_done << "/" << p.samples_total << " after " << p.elapsed_seconds
                    << " s (" << (p.elapsed_seconds > 0 ? p.samples_done / p.elapsed_seconds : 0) << " img/s incl. "
                    << "reused), ETA " << p.eta_seconds << " s, RSS " << memory_mb("VmRSS") << " MB\n"
                    << std::flush;
          next_report = p.samples_done * 10 / p.samples_total + 1;
        }
        return p.samples_done < stop_after * p.samples_total;
      });
    } catch (const mumoe::Cancelled&) {
      cancelled = true;
    }
    std::cout << "{\"images\": " << session->sample_count() << ", \"threads\": " << threads
              << ", \"open_s\": " << open_seconds << ", \"cancelled\": " << (cancelled ? "true" : "false")
              << ", \"chunks_computed\": " << summary.chunks_computed << ", \"chunks_reused\": "
              << summary.chunks_reused << ", \"extract_s\": " << summary.seconds << ", \"images_per_s\": "
              << (summary.seconds > 0 ? static_cast<double>(std::min(summary.chunks_computed * options.chunk_size,
                                                                     session->sample_count())) /
                                                summary.seconds
                                          : 0)
              << ", \"rss_mb\": " << memory_mb("VmRSS") << ", \"peak_rss_mb\": " << memory_mb("VmHWM") << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "mumoe-bench-folder: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
