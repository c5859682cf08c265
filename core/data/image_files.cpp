#include "data/image_files.h"

#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <cstring>
#include <sstream>

#include "io/errors.h"
#include "io/file_checks.h"
#include "io/image_header.h"

namespace mumoe::data {
namespace fs = std::filesystem;
namespace {

bool is_image(const fs::path& p) {
  auto ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// Decodes one image file as uint8 [channels, H, W] at its stored size (channels 1 = grey,
// 3 = RGB; 0 = grey if the file is grey, else RGB).
torch::Tensor decode_file(const std::string& path, int64_t channels) {
  // OpenCV's own warnings ("imread_(…): can't read header") would reach the user's terminal
  // beside the error that names the file: mumoe reports decoding failures itself.
  static const bool silenced = [] {
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    return true;
  }();
  (void)silenced;
  io::require_regular_file(path);
  // The header's size against the pixel and aspect limits before the decoder allocates, and an
  // unreadable file named as such (not "corrupt").
  io::check_image_header(path);
  cv::Mat image;
  try {
    image = cv::imread(path, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    // OpenCV refuses headers it cannot decode safely (e.g. more than 2^30 pixels) by assertion.
    throw FileError(path, "cannot decode the image (OpenCV: " + e.err + "; a hostile or corrupt header?)");
  }
  if (image.empty()) throw FileError(path, "cannot decode the image (corrupt or not an image)");
  if (image.depth() != CV_8U) image.convertTo(image, CV_8U, 1.0 / 256);
  if (channels == 0) channels = image.channels() == 1 ? 1 : 3;
  if (channels == 1 && image.channels() != 1)
    cv::cvtColor(image, image, image.channels() == 4 ? cv::COLOR_BGRA2GRAY : cv::COLOR_BGR2GRAY);
  else if (channels == 3 && image.channels() == 1)
    cv::cvtColor(image, image, cv::COLOR_GRAY2RGB);
  else if (channels == 3)
    cv::cvtColor(image, image, image.channels() == 4 ? cv::COLOR_BGRA2RGB : cv::COLOR_BGR2RGB);
  const auto t = torch::from_blob(image.data, {image.rows, image.cols, channels}, torch::kUInt8);
  // clone, not contiguous(): for one channel (or a 1 × 1 image) the permuted view is already
  // contiguous, contiguous() would return it as it is, and it would point into `image`, which is
  // freed on return (a use after free that ASan found).
  return t.permute({2, 0, 1}).clone(at::MemoryFormat::Contiguous);
}

// Decodes every path into one uint8 tensor [S, C, H, W] with a fixed size and channel count.
torch::Tensor decode_all(const std::vector<std::string>& paths, ImageDecodeOptions options) {
  std::vector<torch::Tensor> images;
  int64_t height = options.size, width = options.size;
  for (const auto& path : paths) {
    auto image = decode_file(path, options.channels);
    options.channels = image.size(0);
    if (height == 0) {
      height = image.size(1);
      width = image.size(2);
    }
    if (image.size(1) != height || image.size(2) != width) {
      if (options.size == 0)
        throw FileError(path, "is " + std::to_string(image.size(2)) + "×" + std::to_string(image.size(1)) +
                                  " but the first image is " + std::to_string(width) + "×" +
                                  std::to_string(height) + " (choose a common size to resize to)");
      cv::Mat hwc(static_cast<int>(image.size(1)), static_cast<int>(image.size(2)),
                  CV_8UC(static_cast<int>(options.channels)));
      std::memcpy(hwc.data, image.permute({1, 2, 0}).contiguous().data_ptr<uint8_t>(), hwc.total() * hwc.elemSize());
      cv::resize(hwc, hwc, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0, cv::INTER_AREA);
      image = torch::from_blob(hwc.data, {height, width, options.channels}, torch::kUInt8).permute({2, 0, 1}).clone();
    }
    images.push_back(std::move(image));
  }
  if (images.empty()) return torch::empty({0, std::max<int64_t>(options.channels, 1), 0, 0}, torch::kUInt8);
  return torch::stack(images);
}

// Image files decoded on demand, one per sample.
class ImageFileStream final : public ImageStream {
 public:
  explicit ImageFileStream(std::vector<std::string> paths) : paths_(std::move(paths)) {
    // The first image decides the channel count and proves the set readable before any job starts.
    channels_ = decode_file(paths_.at(0), 0).size(0);
    for (const auto& path : paths_) {
      std::error_code ec;
      const auto bytes = fs::file_size(path, ec);
      if (ec) throw FileError(path, "cannot be read (" + ec.message() + ")");
      const auto modified = fs::last_write_time(path, ec).time_since_epoch().count();
      fingerprint_ += path + '\0' + std::to_string(bytes) + '\0' + std::to_string(modified) + '\n';
    }
  }
  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  int64_t channels() const override { return channels_; }
  torch::Tensor image(int64_t i) const override { return decode_file(paths_.at(static_cast<size_t>(i)), channels_); }
  std::string source(int64_t i) const override { return paths_.at(static_cast<size_t>(i)); }
  const std::string& fingerprint() const override { return fingerprint_; }

 private:
  std::vector<std::string> paths_;
  int64_t channels_ = 0;
  std::string fingerprint_;
};

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The labelled files of an image set, before decoding.
struct ImageListing {
  std::vector<std::string> paths;
  LabelledImages labelled;  ///< everything but the images
};

ImageListing list_image_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw FileError(dir, "is not a directory");
  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) throw FileError(dir, "has no class sub-folders (expected DIR/<class>/<image>)");
  ImageListing out;
  std::vector<int64_t> labels;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(fs::path(dir) / classes[c]))
      if (entry.is_regular_file() && is_image(entry.path())) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      out.paths.push_back(std::move(f));
      labels.push_back(static_cast<int64_t>(c));
    }
  }
  if (out.paths.empty()) throw FileError(dir, "contains no images (.jpg, .jpeg, .png, .bmp)");
  out.labelled.labels = torch::tensor(labels, torch::kLong);
  out.labelled.class_names = classes;
  out.labelled.identity = "folder:" + dir;
  return out;
}

ImageListing list_celeba(const std::string& dir, const std::string& split) {
  const std::map<std::string, int> splits = {{"train", 0}, {"valid", 1}, {"test", 2}};
  if (!splits.count(split)) throw UsageError("unknown CelebA split '" + split + "' (expected train, valid or test)");
  const auto attr_path = (fs::path(dir) / "list_attr_celeba.txt").string();
  const auto part_path = (fs::path(dir) / "list_eval_partition.txt").string();

  io::require_regular_file(attr_path);
  io::require_regular_file(part_path);
  std::ifstream attr(attr_path);
  if (!attr) throw FileError(attr_path, "cannot open the attribute file");
  std::string line;
  std::getline(attr, line);
  int64_t declared = 0;
  try {
    declared = std::stoll(line);
  } catch (const std::exception&) {
    throw FileError(attr_path, "line 1 must hold the number of images");
  }
  std::getline(attr, line);
  const auto names = split_ws(line);
  if (names.empty()) throw FileError(attr_path, "line 2 must hold the attribute names");
  std::map<std::string, std::vector<int64_t>> rows;
  for (int64_t number = 3; std::getline(attr, line); ++number) {
    const auto cols = split_ws(line);
    if (cols.empty()) continue;
    if (cols.size() != names.size() + 1)
      throw FileError(attr_path, "line " + std::to_string(number) + " has " + std::to_string(cols.size()) +
                                     " columns; expected the image name and " + std::to_string(names.size()) +
                                     " attributes");
    std::vector<int64_t> values;
    for (size_t k = 1; k < cols.size(); ++k) {
      if (cols[k] != "1" && cols[k] != "-1")
        throw FileError(attr_path, "line " + std::to_string(number) + ": attribute value '" + cols[k] +
                                       "' is not 1 or -1");
      values.push_back(cols[k] == "1" ? 1 : 0);
    }
    rows[cols[0]] = std::move(values);
  }
  if (static_cast<int64_t>(rows.size()) != declared)
    throw FileError(attr_path, "declares " + std::to_string(declared) + " images but lists " +
                                   std::to_string(rows.size()));

  std::ifstream part(part_path);
  if (!part) throw FileError(part_path, "cannot open the partition file");
  std::vector<std::string> paths;
  std::vector<int64_t> attributes;
  for (int64_t number = 1; std::getline(part, line); ++number) {
    const auto cols = split_ws(line);
    if (cols.empty()) continue;
    if (cols.size() != 2 || (cols[1] != "0" && cols[1] != "1" && cols[1] != "2"))
      throw FileError(part_path, "line " + std::to_string(number) + " must be '<image> <0|1|2>'");
    if (std::stoi(cols[1]) != splits.at(split)) continue;
    auto it = rows.find(cols[0]);
    if (it == rows.end())
      throw FileError(part_path, "line " + std::to_string(number) + ": image " + cols[0] +
                                     " is not in " + attr_path);
    paths.push_back((fs::path(dir) / "img_align_celeba" / cols[0]).string());
    attributes.insert(attributes.end(), it->second.begin(), it->second.end());
  }
  if (paths.empty()) throw FileError(part_path, "lists no image of the '" + split + "' split");
  ImageListing out;
  auto& l = out.labelled;
  l.labels = torch::zeros({static_cast<int64_t>(paths.size())}, torch::kLong);
  l.class_names = {"face"};
  l.attributes = torch::tensor(attributes, torch::kLong).view({static_cast<int64_t>(paths.size()),
                                                               static_cast<int64_t>(names.size())});
  l.attribute_names = names;
  l.identity = "celeba:" + dir + ":" + split;
  out.paths = std::move(paths);
  return out;
}

LabelledImages decoded(ImageListing listing, const ImageDecodeOptions& options) {
  auto out = std::move(listing.labelled);
  out.images = decode_all(listing.paths, options);
  return out;
}

LabelledImages streamed(ImageListing listing) {
  auto out = std::move(listing.labelled);
  out.stream = std::make_shared<ImageFileStream>(std::move(listing.paths));
  return out;
}

}  // namespace

LabelledImages load_image_folder(const std::string& dir, const ImageDecodeOptions& options) {
  return decoded(list_image_folder(dir), options);
}

LabelledImages load_celeba(const std::string& dir, const std::string& split, const ImageDecodeOptions& options) {
  return decoded(list_celeba(dir, split), options);
}

LabelledImages open_image_folder(const std::string& dir) { return streamed(list_image_folder(dir)); }

LabelledImages open_celeba(const std::string& dir, const std::string& split) {
  return streamed(list_celeba(dir, split));
}

}  // namespace mumoe::data
